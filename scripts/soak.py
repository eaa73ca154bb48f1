#!/usr/bin/env python3
"""Holding up from outside: the checks an outside tester runs against the built binary, as a
script anyone can run again and compare.

    cargo build --release -p runner
    python3 scripts/soak.py                          # every check, default sizes
    python3 scripts/soak.py --kills 80 --double 20 --fuzz 10500
    python3 scripts/soak.py --only fuzz --fuzz 500

- kills: runs of command tasks killed with SIGKILL up to three times each at random moments,
  then resumed to their end; every task is recorded as succeeded exactly once, no task starts
  after its success was recorded, and every run succeeds.
- double: a run killed mid-way, then two `runner resume` started at once; exactly one drives
  it (the other is refused), and the run succeeds with every task once.
- streams: `runner serve` with 200 clients following one run's event stream at once while
  it runs; every client must see the run end.
- fuzz: plans from examples/ and the corpus, damaged at random (bytes changed, cut, repeated,
  lines swapped), through `validate` and `critic`; none may panic (exit 101) or take over
  10 s, and the slowest is reported.

Each check prints one line of figures; the script exits 1 when any check found a fault.
"""

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK = 'echo "start $(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) $RUNNER_ATTEMPT" >> "$1"\nsleep "$2"\necho done\n'


def plan(folder, tasks, seconds):
    """A plan of `tasks` command tasks in chains of three that each log their start and sleep."""
    script = folder / "task.sh"
    script.write_text(TASK)
    lines = folder / "lines.txt"
    workflow = []
    for i in range(tasks):
        after = f", depends_on: [t{i - 1}]" if i % 3 else ""
        workflow.append(f"    - {{id: t{i}, agent: slow, input: t{i}{after}}}")
    text = (
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: soak}\nspec:\n  control_logic: {max_concurrency: 4}\n"
        f"  agent_definitions:\n    slow: {{runtime: command, command: [sh, '{script}', '{lines}', '{seconds}']}}\n"
        "  workflow:\n" + "\n".join(workflow) + "\n"
    )
    path = folder / "plan.yaml"
    path.write_text(text)
    return path


def records(home, run):
    import json

    log = Path(home) / "runs" / run / "events.jsonl"
    out = []
    for line in log.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a torn last line, which runner drops too
    return out


def check_run(home, folder, run, tasks):
    """Faults of a finished run: its status, each success once, no start after a success."""
    faults = []
    recs = records(home, run)
    done = [r for r in recs if r.get("type") == "RunCompleted"]
    if not done or done[-1].get("status") != "succeeded":
        faults.append(f"{run}: did not succeed ({done[-1].get('status') if done else 'no RunCompleted'})")
    succeeded = {}
    for r in recs:
        if r.get("type") == "TaskSucceeded":
            if r["task"] in succeeded:
                faults.append(f"{run}: task {r['task']} succeeded twice")
            succeeded[r["task"]] = r["at"]
    if len(succeeded) != tasks:
        faults.append(f"{run}: {len(succeeded)} of {tasks} tasks succeeded")
    for line in (folder / "lines.txt").read_text().splitlines():
        _, at, mark = line.split(" ")
        task = mark.split("/")[1]
        if task in succeeded and at > succeeded[task]:
            faults.append(f"{run}: task {task} started at {at}, after its success at {succeeded[task]}")
    return faults


def kills(binary, count, rng):
    faults, killed, started = [], 0, time.time()
    for n in range(count):
        with tempfile.TemporaryDirectory() as tmp:
            folder, home = Path(tmp), Path(tmp) / "home"
            path = plan(folder, 20, "0.1")
            env = dict(os.environ, RUNNER_HOME=str(home))
            run = f"k{n}"
            args = [binary, "apply", str(path), "--yes", "--run-id", run]
            for _ in range(rng.randint(1, 3)):
                child = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(rng.uniform(0.05, 0.5))
                if child.poll() is None:
                    child.send_signal(signal.SIGKILL)
                    killed += 1
                child.wait()
                args = [binary, "resume", run]
            # A run that ended before its last kill says so here and is checked like the others.
            subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
            faults += check_run(home, folder, run, 20)
    print(f"kills: {count} runs, {killed} SIGKILLs, {len(faults)} faults, {time.time() - started:.1f} s")
    return faults


def double(binary, count, rng):
    faults, started = [], time.time()
    for n in range(count):
        with tempfile.TemporaryDirectory() as tmp:
            folder, home = Path(tmp), Path(tmp) / "home"
            env = dict(os.environ, RUNNER_HOME=str(home))
            run = f"d{n}"
            path = plan(folder, 12, "0.2")
            child = subprocess.Popen(
                [binary, "apply", str(path), "--yes", "--run-id", run],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(rng.uniform(0.1, 0.3))
            child.send_signal(signal.SIGKILL)
            child.wait()
            both = [
                subprocess.Popen([binary, "resume", run], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                for _ in range(2)
            ]
            codes = sorted(p.wait(timeout=120) for p in both)
            if codes.count(0) != 1:
                faults.append(f"{run}: the two resumes ended {codes}, not one driving (0) and one refused")
            faults += check_run(home, folder, run, 12)
    print(f"double: {count} double resumes, {len(faults)} faults, {time.time() - started:.1f} s")
    return faults


def streams(binary, count, rng):
    """`count` SSE clients on one live run; how many saw it end."""
    import socket
    import threading

    faults, started = [], time.time()
    with tempfile.TemporaryDirectory() as tmp:
        folder, home = Path(tmp), Path(tmp) / "home"
        path = plan(folder, 30, "0.2")
        env = dict(os.environ, RUNNER_HOME=str(home))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen(
            [binary, "serve", "--addr", f"127.0.0.1:{port}"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        run = subprocess.Popen(
            [binary, "apply", str(path), "--yes", "--run-id", "s"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        ended = []

        def follow():
            deadline = time.time() + 120
            while time.time() < deadline:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
                        conn.sendall(f"GET /api/runs/s/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
                        seen = b""
                        while time.time() < deadline:
                            chunk = conn.recv(65536)
                            if not chunk:
                                break
                            seen = (seen + chunk)[-4096:]
                            if b"RunCompleted" in seen:
                                ended.append(1)
                                return
                except OSError:
                    pass
                time.sleep(0.2)

        time.sleep(0.5)
        clients = [threading.Thread(target=follow) for _ in range(count)]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        run.wait(timeout=120)
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    if len(ended) != count:
        faults.append(f"streams: {len(ended)} of {count} clients saw the run end")
    print(f"streams: {count} live streams of one run, {len(ended)} saw it end, {time.time() - started:.1f} s")
    return faults


def damaged(text, rng):
    """`text` with one to three random changes."""
    data = bytearray(text.encode())
    for _ in range(rng.randint(1, 3)):
        if not data:
            break
        kind = rng.randrange(5)
        at = rng.randrange(len(data))
        if kind == 0:
            data[at] = rng.randrange(256)
        elif kind == 1:
            del data[at:]
        elif kind == 2:
            end = min(len(data), at + rng.randint(1, 400))
            data[at:at] = data[at:end] * rng.randint(1, 50)
        elif kind == 3:
            lines = data.split(b"\n")
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
        else:
            data[at:at] = rng.choice([b"{{", b"&a ", b"*a", b"\t", b"- ", b": ", b"\x00", b"\xff", b"'"])
    return bytes(data)


def fuzz(binary, count, rng):
    seeds = sorted((ROOT / "examples").rglob("*.yaml")) + sorted((ROOT.parent / "shared" / "corpus").rglob("*.yaml"))
    texts = [p.read_text(errors="replace") for p in seeds]
    faults, slowest, started = [], (0.0, ""), time.time()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.yaml"
        for n in range(count):
            path.write_bytes(damaged(rng.choice(texts), rng))
            for command in ("validate", "critic"):
                began = time.time()
                try:
                    done = subprocess.run(
                        [binary, command, str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=10
                    )
                except subprocess.TimeoutExpired:
                    faults.append(f"fuzz {n}: {command} took over 10 s")
                    continue
                took = time.time() - began
                if took > slowest[0]:
                    slowest = (took, command)
                if done.returncode not in (0, 1, 2):
                    kept = Path(tmp).parent / f"runner-fuzz-{n}.yaml"
                    kept.write_bytes(path.read_bytes())
                    faults.append(f"fuzz {n}: {command} exited {done.returncode} (kept as {kept})")
    print(
        f"fuzz: {count} damaged plans through validate and critic, {len(faults)} faults, "
        f"slowest {slowest[0]:.2f} s ({slowest[1]}), {time.time() - started:.1f} s"
    )
    return faults


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(ROOT / "target" / "release" / "runner"))
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--double", type=int, default=10)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--fuzz", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--only", choices=["kills", "double", "streams", "fuzz"])
    args = parser.parse_args()
    rng = random.Random(args.seed)
    faults = []
    checks = (
        ("kills", kills, args.kills),
        ("double", double, args.double),
        ("streams", streams, args.streams),
        ("fuzz", fuzz, args.fuzz),
    )
    for name, check, count in checks:
        if args.only in (None, name):
            faults += check(args.binary, count, rng)
    for fault in faults:
        print(f"FAULT {fault}", file=sys.stderr)
    sys.exit(1 if faults else 0)


if __name__ == "__main__":
    main()
