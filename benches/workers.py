#!/usr/bin/env python3
"""Throughput of workers: a fan-out of 2,000 command tasks that each take about 50 ms
(`sleep 0.05`, argv, no shell), run by `runner apply --store URL --no-local-work` with 1, 2
and 4 `runner worker` processes on the same PostgreSQL. The tasks sleep, so this measures
coordination (the queue, claims, replies, the coordinator's log), not CPU.

    cargo build --release -p runner
    python3 benches/workers.py                       # 1, 2 and 4 workers, 2,000 tasks
    python3 benches/workers.py --workers 1 2 --tasks 500 --concurrency 16

Each run gets a schema of its own (dropped after). The database is RUNNER_TEST_DATABASE_URL,
else postgres://postgres@127.0.0.1:5432/test. Each line gives the wall time of the apply and
its speed-up over one worker.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/test"


def plan_text(tasks, seconds):
    """`tasks` independent tasks of a command agent that sleeps `seconds`."""
    lines = [
        "apiVersion: runner/v1",
        "kind: Plan",
        f"metadata: {{name: fan-out-{tasks}}}",
        "spec:",
        "  agent_definitions:",
        f"    nap: {{runtime: command, command: [sleep, '{seconds}']}}",
        "  workflow:",
    ]
    lines += [f"    - {{id: t{i}, agent: nap, input: x}}" for i in range(tasks)]
    return "\n".join(lines) + "\n"


def psql(url, sql):
    subprocess.run(["psql", url, "-q", "-v", "ON_ERROR_STOP=1", "-c", sql], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(runner, base, plan, workers, concurrency, timeout, folder):
    """Seconds the apply took with `workers` workers, and its exit code."""
    schema = f"bench_workers_{os.getpid()}_{workers}"
    psql(base, f"DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")
    separator = "&" if "?" in base else "?"
    url = f"{base}{separator}options=-csearch_path%3D{schema}"
    env = dict(os.environ, RUNNER_HOME=os.path.join(folder, "home"), NO_COLOR="1")
    # The tables are made before the clock starts.
    subprocess.run([runner, "runs", "--store", url], env=env, check=True, stdout=subprocess.DEVNULL)
    started = [subprocess.Popen([runner, "worker", "--store", url, "--concurrency", str(concurrency)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(workers)]
    try:
        start = time.monotonic()
        apply = subprocess.run([runner, "apply", plan, "--yes", "--store", url, "--no-local-work"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=timeout)
        seconds = time.monotonic() - start
        if apply.returncode != 0:
            print(apply.stderr[-2000:], file=sys.stderr)
        return seconds, apply.returncode
    finally:
        for worker in started:
            worker.send_signal(signal.SIGTERM)
        for worker in started:
            worker.wait()
        psql(base, f"DROP SCHEMA {schema} CASCADE")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runner", default="target/release/runner", help="the binary (default: %(default)s)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--seconds", default="0.05", help="how long each task sleeps")
    parser.add_argument("--concurrency", type=int, default=8, help="attempts each worker runs at a time")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before an apply is given up")
    args = parser.parse_args()
    if not os.access(args.runner, os.X_OK):
        sys.exit(f"{args.runner} is not an executable; build it with `cargo build --release -p runner`")
    base = os.environ.get("RUNNER_TEST_DATABASE_URL", DEFAULT_URL)
    print(f"{args.tasks} tasks of {args.seconds} s, {args.concurrency} attempts a worker at a time")
    print(f"{'workers':>7} {'seconds':>8} {'tasks/s':>8} {'speed-up':>8} {'exit':>5}")
    with tempfile.TemporaryDirectory(prefix="runner-workers-") as folder:
        plan = os.path.join(folder, "fan-out.yaml")
        with open(plan, "w") as out:
            out.write(plan_text(args.tasks, args.seconds))
        first = None
        for workers in args.workers:
            seconds, code = measure(args.runner, base, plan, workers, args.concurrency, args.timeout, folder)
            first = first or seconds
            print(f"{workers:>7} {seconds:>8.2f} {args.tasks / seconds:>8.0f} {first / seconds:>8.2f} {code:>5}",
                  flush=True)


if __name__ == "__main__":
    main()
