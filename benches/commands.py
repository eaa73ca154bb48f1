#!/usr/bin/env python3
"""Whole commands on large plans: time and peak memory of `runner validate`, `runner critic`
(human and JSON), `runner apply --yes`, `runner apply --yes --reuse` after it (`reuse`: every task's output
comes from the task cache the `apply` before filled) and with an empty cache (`reuse-miss`:
every task is looked up and runs), and `runner test` (a scenario that gives every task a
2 s latency in virtual time, so a chain of 1000 tasks is a run of 33 virtual minutes), each
run as a process, as a user would type them. Each task has an input of its own, so each has
a key of its own.

Plans are generated with the shapes of `benches/engine.rs` (a chain; a fan-out 1 -> N -> 1
whose sink lists every middle task on one line; layers of 100 tasks with 2 or 3 parents from
the layer before) on a mock agent that answers at once, written as YAML in flow style, and
`map`: the fan-out written as a map (`for_each` over the source's output, N - 2 items made at
run time), to compare with `fan_out` side by side.

    cargo build --release -p runner
    python3 benches/commands.py                      # 1k, 10k and 100k tasks, every shape
    python3 benches/commands.py --sizes 1000 --shapes fan_out --commands apply

Each line gives the wall time, the time per task, the peak resident memory of the process
(from wait4's rusage) per task, the exit code and the lines of output. A command that takes
longer than --timeout seconds is killed and reported as such.
"""

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

LAYER = 100
SHAPES = ("chain", "fan_out", "layered", "map")
COMMANDS = {
    "validate": ["validate"],
    "critic": ["critic"],
    "critic-json": ["critic", "--format", "json"],
    "apply": ["apply", "--yes"],
    "reuse": ["apply", "--yes", "--reuse"],
    "reuse-miss": ["apply", "--yes", "--reuse"],
    "test": ["test"],
}


def parents(shape, tasks):
    """The dependencies of each task, as indices."""
    rng = random.Random(0x2545F491)
    out = []
    for i in range(tasks):
        if shape == "chain":
            out.append([i - 1] if i else [])
        elif shape == "fan_out":
            out.append([] if i == 0 else list(range(1, tasks - 1)) if i + 1 == tasks else [0])
        elif i < LAYER:
            out.append([])
        else:
            previous = (i // LAYER - 1) * LAYER
            out.append(rng.sample(range(previous, previous + LAYER), 2 + rng.randrange(2)))
    return out


def plan_text(shape, tasks):
    """An enveloped plan of `tasks` tasks of `shape` on a mock agent that answers `ok`."""
    if shape == "map":
        return map_text(tasks)
    lines = [
        "apiVersion: runner/v1",
        "kind: Plan",
        f"metadata: {{name: {shape.replace('_', '-')}-{tasks}}}",
        "spec:",
        "  agent_definitions:",
        "    noop: {runtime: mock, default: ok}",
        "  workflow:",
    ]
    for i, deps in enumerate(parents(shape, tasks)):
        after = f", depends_on: [{', '.join(f't{d}' for d in deps)}]" if deps else ""
        lines.append(f"    - {{id: t{i}, agent: noop, input: x{i}{after}}}")
    return "\n".join(lines) + "\n"


def map_text(tasks):
    """`fan_out` as a map: a source whose output lists `tasks - 2` items, one map task over it
    (its items are the middle tasks, made at run time) and a sink that reads the map."""
    items = tasks - 2
    return "\n".join([
        "apiVersion: runner/v1",
        "kind: Plan",
        f"metadata: {{name: map-{tasks}}}",
        "spec:",
        "  agent_definitions:",
        "    noop: {runtime: mock, default: ok}",
        f"    source: {{runtime: mock, responses: {{t0: '{list(range(items))}'}}}}",
        "  workflow:",
        "    - {id: t0, agent: source, input: x}",
        f"    - {{id: middle, agent: noop, input: x, depends_on: [t0], for_each: tasks.t0.output, max_items: {items}}}",
        "    - {id: sink, agent: noop, input: x, depends_on: [middle]}",
    ]) + "\n"


def scenario_text(plan_file):
    """A plan test of `plan_file` in which the mock agent takes 2 s (virtual) per task."""
    return "\n".join([
        "apiVersion: runner/v1",
        "kind: PlanTest",
        "metadata: {name: latency}",
        "spec:",
        f"  plan: {plan_file}",
        "  overrides: {agents: {noop: {latency: 2s}}}",
        "  expect: {status: succeeded}",
    ]) + "\n"


def measure(argv, env, timeout):
    """Runs one command; returns (seconds, peak RSS in bytes, exit code or None, output lines)."""
    with tempfile.TemporaryFile() as out:
        start = time.monotonic()
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(child.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(child.pid, 0)
                child.returncode = -1
                return time.monotonic() - start, usage.ru_maxrss * 1024, None, 0
            time.sleep(0.005)
        seconds = time.monotonic() - start
        out.seek(0)
        lines = sum(1 for _ in out)
        return seconds, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status), lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runner", default="target/release/runner", help="the binary (default: %(default)s)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--commands", nargs="+", choices=list(COMMANDS), default=list(COMMANDS))
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a command is killed")
    args = parser.parse_args()
    if not os.access(args.runner, os.X_OK):
        sys.exit(f"{args.runner} is not an executable; build it with `cargo build --release -p runner`")
    print(f"{'command':<12} {'shape':<8} {'tasks':>7} {'seconds':>8} {'us/task':>9} {'peak MB':>8} "
          f"{'KB/task':>8} {'exit':>5} {'lines':>7}")
    with tempfile.TemporaryDirectory(prefix="runner-commands-") as folder:
        env = dict(os.environ, RUNNER_HOME=os.path.join(folder, "home"), NO_COLOR="1")
        for tasks in args.sizes:
            for shape in args.shapes:
                path = os.path.join(folder, f"{shape}-{tasks}.yaml")
                with open(path, "w") as plan:
                    plan.write(plan_text(shape, tasks))
                scenario = os.path.join(folder, f"{shape}-{tasks}.test.yaml")
                with open(scenario, "w") as test:
                    test.write(scenario_text(os.path.basename(path)))
                for name in args.commands:
                    target = scenario if name == "test" else path
                    # `reuse` finds what the `apply` before it stored; `reuse-miss` looks every
                    # task up in an empty cache.
                    home = os.path.join(folder, f"empty-{shape}-{tasks}") if name == "reuse-miss" else env["RUNNER_HOME"]
                    run_env = dict(env, RUNNER_HOME=home)
                    seconds, peak, code, lines = measure([args.runner, *COMMANDS[name], target], run_env, args.timeout)
                    exit_text = "kill" if code is None else str(code)
                    print(f"{name:<12} {shape:<8} {tasks:>7} {seconds:>8.2f} {seconds / tasks * 1e6:>9.1f} "
                          f"{peak / 2**20:>8.0f} {peak / tasks / 1024:>8.2f} {exit_text:>5} {lines:>7}", flush=True)


if __name__ == "__main__":
    main()
