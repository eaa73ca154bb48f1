#!/usr/bin/env python3
"""The cluster soak (docs/workers.md): many runs at once on three `runner worker`s that carry
out attempts and two that coordinate runs, all on one PostgreSQL, while a random one of them is
SIGKILLed every few seconds (and a new one started in its place) and, once, every database
connection is cut for a few seconds.

    cargo build --release -p runner
    python3 scripts/cluster_soak.py                      # 40 runs, a kill every 3 s
    python3 scripts/cluster_soak.py --runs 80 --kill-every 2
    python3 scripts/cluster_soak.py --quick              # the CI variant's sizes

Each run mixes `command` tasks, an `http` task and a tool-using `llm` task whose model is a
fake OpenAI-compatible server in this script: it calls a safe tool, then a destructive one
behind approval (the run pauses; this script approves the call with `runner approve` and hands
the run back with `runner resume --detach`), then answers. Every fifth run also has a task that
fails and is skipped, so it ends `partial`. The processes reach the database through a TCP proxy
in this script, which is how the connection is cut (every connection closed, new ones refused).

At the end, the checks: every run ended with the outcome an undisturbed run of its plan has
(one reference run of each kind, without the cluster, first); every run's records are numbered
1..n with nothing missing, no task succeeded twice and no model turn or tool result is recorded
twice; no record was written under an older fence after a newer one wrote (no coordinator wrote
after another took its run over); the destructive tool ran at most once per approval; no task
and no tool started after the task's success was recorded (no worker that lost its claim went
on). Then
the figures: runs, tasks, kills, cut connections, tasks a second, and the slowest failover (from
a coordinator's kill until another holds each of its runs' leases; from a worker's kill until
its attempts are claimed again).

Exit 0 when every check holds, 1 when one fails (each fault printed), 2 when the soak cannot
start (no database, no binary).
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/test"

TASK = 'echo "start $(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) $RUNNER_ATTEMPT" >> "$1"\nread -r input\nsleep "$2"\necho "did $input"\n'
TOOL = 'args=$(cat)\necho "$1 $(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) $RUNNER_ATTEMPT $args" >> "$2"\necho "$1 done"\n'


class Proxy:
    """A TCP proxy to the database; `cut` closes every connection and refuses new ones."""

    def __init__(self, host, port):
        self.target = (host, port)
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(256)
        self.port = self.server.getsockname()[1]
        self.lock = threading.Lock()
        self.open = set()
        self.refuse_until = 0.0
        self.cut_connections = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            client, _ = self.server.accept()
            if time.monotonic() < self.refuse_until:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open.add(client)
                self.open.add(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    def pump(self, source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            with self.lock:
                self.open.discard(s)

    def cut(self, seconds):
        """Closes every connection and refuses new ones for `seconds`; how many were closed."""
        self.refuse_until = time.monotonic() + seconds
        with self.lock:
            sockets = list(self.open)
            self.open.clear()
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass
        self.cut_connections += len(sockets) // 2
        return len(sockets) // 2


class Model:
    """The fake model server and the `http` agents' service, with its request log."""

    def __init__(self, latency):
        self.requests = Counter()
        self.lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(latency)
                if self.path.startswith("/service"):
                    answer = ("ok " + body.decode(errors="replace")[:40]).encode()
                    return self.reply(200, answer, "text/plain")
                request = json.loads(body)
                messages = request.get("messages", [])
                key = next((m["content"].split("soak-key:")[1].split()[0] for m in messages
                            if m.get("role") == "user" and "soak-key:" in (m.get("content") or "")), "?")
                turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
                with model.lock:
                    model.requests[(key, turn)] += 1
                tool = {1: "note", 2: "wipe"}.get(turn)
                if tool:
                    arguments = json.dumps({"key": key, "turn": turn})
                    message = {"role": "assistant", "content": None, "tool_calls": [
                        {"id": f"call_{turn}", "type": "function", "function": {"name": tool, "arguments": arguments}}]}
                    finish = "tool_calls"
                else:
                    message, finish = {"role": "assistant", "content": f"done {key}"}, "stop"
                answer = {"id": "x", "object": "chat.completion", "model": "m",
                          "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
                self.reply(200, json.dumps(answer).encode(), "application/json")

            def reply(self, status, data, kind):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the process that asked was killed meanwhile

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def plan_text(folder, model_url, run, commands, seconds, failing):
    """The plan of run `run`: chains of command tasks, an http task, a tool-using llm task last."""
    lines, tools_log = folder / "lines.txt", folder / "tools.log"
    workflow = []
    for i in range(commands):
        after = f", depends_on: [c{i - 1}]" if i % 3 else ""
        workflow.append(f"    - {{id: c{i}, agent: sh, input: c{i}{after}}}")
    workflow.append("    - {id: h, agent: web, input: hello, depends_on: [c0]}")
    ends = [f"c{i}" for i in range(commands) if i % 3 == 2 or i == commands - 1]
    if failing:
        workflow.append("    - {id: bad, agent: broken, on_failure: {action: skip}}")
    workflow.append(f"    - {{id: l, agent: talker, input: \"soak-key:{run}/l go\", depends_on: [h, {', '.join(ends)}]}}")
    return (
        f"apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: soak-{'partial' if failing else 'whole'}}}\nspec:\n"
        f"  providers:\n    fake: {{kind: openai, base_url: \"{model_url}/v1\", model: m, stream: false}}\n"
        "  tools:\n"
        f"    note: {{description: Note, command: [sh, tool.sh, note, '{tools_log}']}}\n"
        f"    wipe: {{description: Wipe, command: [sh, tool.sh, wipe, '{tools_log}'], destructive: true}}\n"
        "  agent_definitions:\n"
        f"    sh: {{runtime: command, command: [sh, task.sh, '{lines}', '{seconds}']}}\n"
        f"    web: {{runtime: http, url: \"{model_url}/service\"}}\n"
        "    broken: {runtime: command, command: [sh, -c, 'exit 3']}\n"
        "    talker: {runtime: llm, provider: fake, tools: [note, wipe], max_turns: 6}\n"
        "  workflow:\n" + "\n".join(workflow) + "\n"
    )


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.folder = Path(tempfile.mkdtemp(prefix="runner-cluster-soak-"))
        (self.folder / "task.sh").write_text(TASK)
        (self.folder / "tool.sh").write_text(TOOL)
        self.home = self.folder / "home"
        base = urllib.parse.urlsplit(args.database)
        self.schema = f"soak_{os.getpid()}_{int(time.time())}"
        self.base = args.database
        self.proxy = Proxy(base.hostname or "127.0.0.1", base.port or 5432)
        query = urllib.parse.urlencode({"options": f"-csearch_path={self.schema}"})
        separator = "&" if base.query else ""
        self.direct = urllib.parse.urlunsplit(base._replace(query=base.query + separator + query))
        netloc = (base.username + "@" if base.username else "") + f"127.0.0.1:{self.proxy.port}"
        self.proxied = urllib.parse.urlunsplit(base._replace(netloc=netloc, query=base.query + separator + query))
        self.model = Model(args.latency)
        self.processes = {}  # name -> (Popen, role)
        self.incarnation = Counter()
        self.kills = Counter()
        self.failovers = {"coordinator": [], "worker": []}
        self.pending_failovers = []
        self.approvals = 0
        self.faults = []

    # -- helpers ---------------------------------------------------------------------------
    def sql(self, statement):
        """Rows of `statement` in the soak's schema, straight to the database (not the proxy)."""
        env = dict(os.environ, PGOPTIONS=f"-csearch_path={self.schema}")
        out = subprocess.run(["psql", self.base, "-XAtq", "-F", "\t", "-c", statement], env=env,
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"psql: {out.stderr.strip()}")
        return [line.split("\t") for line in out.stdout.splitlines() if line]

    def runner(self, *args, store=None, timeout=120):
        env = dict(os.environ, RUNNER_HOME=str(self.home), NO_COLOR="1", RUNNER_LEASE_MS=str(self.args.lease_ms))
        command = [self.args.runner, *args] + (["--store", store] if store else [])
        return subprocess.run(command, cwd=self.folder, env=env, capture_output=True, text=True, timeout=timeout)

    def start(self, name, role):
        self.incarnation[name] += 1
        err = open(self.folder / f"{name}.{self.incarnation[name]}.err", "w")
        args = ["worker", "--store", self.proxied]
        args += ["--concurrency", "0"] if role == "coordinator" else ["--no-takeover", "--concurrency", "4"]
        env = dict(os.environ, RUNNER_HOME=str(self.home), NO_COLOR="1", RUNNER_LEASE_MS=str(self.args.lease_ms),
                   RUNNER_DB_RECONNECT_SECS="120")
        child = subprocess.Popen([self.args.runner, *args], cwd=self.folder, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=err)
        self.processes[name] = (child, role)

    def owner_of(self, child):
        return f"% pid {child.pid}"

    # -- the soak ----------------------------------------------------------------------------
    def reference_outcomes(self):
        """The outcome of an undisturbed run of each kind of plan, run alone without the cluster."""
        outcomes = {}
        for failing in (False, True):
            name = f"reference-{'partial' if failing else 'whole'}"
            path = self.folder / f"{name}.yaml"
            path.write_text(plan_text(self.folder, self.model.url, name, self.args.commands, 0, failing))
            out = self.runner("apply", path.name, "--yes", "--run-id", name, "--approve-tool", "wipe")
            record = [json.loads(line) for line in (self.home / "runs" / name / "events.jsonl").read_text().splitlines()]
            last = record[-1] if record else {}
            outcomes[failing] = last.get("status")
            if last.get("type") != "RunCompleted":
                self.faults.append(f"the reference run {name} did not end: {out.stderr[-400:]}")
        return outcomes

    def submit(self):
        """Writes and submits every run with `apply --detach`, eight at a time."""
        runs = [f"soak-{i}" for i in range(self.args.runs)]
        for i, run in enumerate(runs):
            failing = i % 5 == 4
            (self.folder / f"{run}.yaml").write_text(
                plan_text(self.folder, self.model.url, run, self.args.commands, self.args.seconds, failing))
        failed = []

        def submit_one(run):
            out = self.runner("apply", f"{run}.yaml", "--yes", "--run-id", run, "--detach", store=self.direct)
            if out.returncode != 0:
                failed.append(f"{run}: apply --detach exited {out.returncode}: {out.stderr[-400:]}")

        threads = []
        for run in runs:
            thread = threading.Thread(target=submit_one, args=(run,))
            thread.start()
            threads.append(thread)
            if len(threads) >= 8:
                threads.pop(0).join()
        for thread in threads:
            thread.join()
        self.faults.extend(failed)
        return runs

    def approve_paused(self):
        """Approves the call each paused run waits for and hands the run back to the cluster."""
        for (run,) in self.sql("SELECT run_id FROM runner_runs WHERE status = 'paused' AND "
                               "coalesce(lease_until < now(), true)"):
            out = self.runner("approve", run, "l", store=self.direct)
            if out.returncode != 0:
                continue  # still driven for a moment, or a coordinator holds it: next round
            self.approvals += 1
            self.runner("resume", run, "--detach", store=self.direct)

    def kill_one(self):
        name = self.rng.choice(sorted(self.processes))
        child, role = self.processes[name]
        owned = self.owner_of(child)
        if role == "coordinator":
            watched = [r for (r,) in self.sql(
                f"SELECT run_id FROM runner_runs WHERE owner LIKE '{owned}' AND lease_until > now() "
                "AND status NOT IN ('succeeded', 'failed', 'partial', 'cancelled')")]
        else:
            watched = [r for (r,) in self.sql(
                f"SELECT id::text FROM runner_attempts WHERE worker LIKE '{owned}' AND state = 'claimed'")]
        child.send_signal(signal.SIGKILL)
        child.wait()
        self.kills[role] += 1
        self.pending_failovers.append((role, owned, watched, time.monotonic()))
        self.start(name, role)

    def watch_failovers(self):
        still = []
        for role, owned, watched, since in self.pending_failovers:
            if not watched:
                continue
            ids = ", ".join(f"'{w}'" for w in watched)
            if role == "coordinator":
                left = self.sql(f"SELECT count(*) FROM runner_runs WHERE run_id IN ({ids}) AND "
                                f"status NOT IN ('succeeded', 'failed', 'partial', 'cancelled', 'paused') AND "
                                f"(owner LIKE '{owned}' OR lease_until IS NULL OR lease_until < now())")
            else:
                left = self.sql(f"SELECT count(*) FROM runner_attempts WHERE id IN ({ids}) AND worker LIKE '{owned}'")
            if int(left[0][0]) == 0:
                self.failovers[role].append(time.monotonic() - since)
            else:
                still.append((role, owned, watched, since))
        self.pending_failovers = still

    def run(self):
        try:
            self.sql("SELECT 1")
        except Exception as error:  # noqa: BLE001 - any failure means no database to soak
            print(f"cluster soak: no database at {self.base}: {error}", file=sys.stderr)
            return 2
        subprocess.run(["psql", self.base, "-XAtq", "-c", f"CREATE SCHEMA {self.schema}"], check=True,
                       capture_output=True)
        try:
            return self.soak()
        finally:
            for child, _ in self.processes.values():
                child.kill()
                child.wait()
            if not self.args.keep:
                subprocess.run(["psql", self.base, "-XAtq", "-c", f"DROP SCHEMA {self.schema} CASCADE"],
                               capture_output=True)

    def soak(self):
        args = self.args
        expected = self.reference_outcomes()
        # The tables, before any process polls them.
        self.runner("runs", store=self.direct)
        for n in range(2):
            self.start(f"coordinator-{n}", "coordinator")
        for n in range(3):
            self.start(f"worker-{n}", "worker")
        started = time.monotonic()
        runs = self.submit()
        next_kill = time.monotonic() + args.kill_every
        cut_at, cut_done = started + args.cut_after, False
        finals = {"succeeded", "failed", "partial", "cancelled"}
        while True:
            now = time.monotonic()
            statuses = dict(self.sql("SELECT run_id, status FROM runner_runs WHERE run_id LIKE 'soak-%'"))
            done = sum(1 for r in runs if statuses.get(r) in finals)
            if done == len(runs) and not self.pending_failovers:
                break
            if now - started > args.deadline:
                waiting = sorted(r for r in runs if statuses.get(r) not in finals)
                self.faults.append(f"{len(waiting)} runs did not end within {args.deadline} s: {waiting[:10]}")
                break
            if done < len(runs) and now >= next_kill:
                self.kill_one()
                next_kill = now + args.kill_every
            if not cut_done and now >= cut_at:
                self.proxy.cut(args.cut_seconds)
                cut_done = True
            self.approve_paused()
            self.watch_failovers()
            time.sleep(0.25)
        elapsed = time.monotonic() - started
        for child, _ in self.processes.values():
            child.send_signal(signal.SIGTERM)
        for child, _ in self.processes.values():
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
        tasks = self.check(runs, expected)
        slowest = {role: max(times, default=0.0) for role, times in self.failovers.items()}
        repeated = sum(n - 1 for n in self.model.requests.values() if n > 1)
        refused = sum(1 for p in self.folder.glob("*.err") for line in p.read_text(errors="replace").splitlines()
                      if "was refused" in line or "lost the claim" in line or "fenced" in line)
        print(
            f"cluster soak: {len(runs)} runs, {tasks} tasks succeeded in {elapsed:.1f} s ({tasks / elapsed:.1f} tasks/s); "
            f"kills: {self.kills['worker']} workers, {self.kills['coordinator']} coordinators; "
            f"database cut once for {args.cut_seconds:g} s ({self.proxy.cut_connections} connections); "
            f"approvals: {self.approvals}; model requests: {sum(self.model.requests.values())} "
            f"({repeated} asked again after a kill); late writes refused: {refused}; "
            f"slowest failover: coordinator {slowest['coordinator']:.2f} s, worker {slowest['worker']:.2f} s; "
            f"faults: {len(self.faults)}"
        )
        for fault in self.faults:
            print(f"  fault: {fault}")
        if self.faults or args.keep:
            print(f"  files: {self.folder}; schema {self.schema}")
        return 1 if self.faults else 0

    # -- the checks --------------------------------------------------------------------------
    def check(self, runs, expected):
        records, fences = defaultdict(list), defaultdict(list)
        for run, seq, fence, record in self.sql("SELECT run_id, seq, fence, record FROM runner_events "
                                                "WHERE run_id LIKE 'soak-%' ORDER BY run_id, seq"):
            records[run].append((int(seq), json.loads(record)))
            fences[run].append(int(fence))
        tools = defaultdict(list)
        for line in (self.folder / "tools.log").read_text().splitlines() if (self.folder / "tools.log").exists() else []:
            tool, at, mark, *rest = line.split(" ", 3)
            tools[mark.split("/")[0]].append((tool, at, mark))
        starts = defaultdict(list)
        for line in (self.folder / "lines.txt").read_text().splitlines():
            _, at, mark = line.split(" ")
            starts[mark.split("/")[0]].append((at, mark))
        succeeded_tasks = 0
        for i, run in enumerate(runs):
            recs = records.get(run, [])
            seqs = [seq for seq, _ in recs]
            if seqs != list(range(1, len(seqs) + 1)):
                self.faults.append(f"{run}: records are not numbered 1..{len(seqs)} without a gap")
            if fences[run] != sorted(fences[run]):
                self.faults.append(f"{run}: a record was written under an older fence after a newer one wrote")
            events = [r for _, r in recs]
            last = events[-1] if events else {}
            want = expected[i % 5 == 4]
            if last.get("type") != "RunCompleted" or last.get("status") != want:
                self.faults.append(f"{run}: ended {last.get('type')} {last.get('status')}, undisturbed it ends {want}")
            success = {}
            for r in events:
                if r.get("type") == "TaskSucceeded":
                    if r["task"] in success:
                        self.faults.append(f"{run}: task {r['task']} succeeded twice")
                    success[r["task"]] = r["at"]
            succeeded_tasks += len(success)
            turns = Counter(r["turn"] for r in events if r.get("type") == "ModelTurn")
            results = Counter(r["call_id"] for r in events if r.get("type") == "ToolCallFinished")
            for turn, n in turns.items():
                if n > 1:
                    self.faults.append(f"{run}: model turn {turn} recorded {n} times")
            for call, n in results.items():
                if n > 1:
                    self.faults.append(f"{run}: the result of {call} recorded {n} times")
            approved = sum(1 for r in events if r.get("type") == "ToolApprovalDecided" and r.get("approved"))
            wipes = sum(1 for tool, _, _ in tools[run] if tool == "wipe")
            if wipes > approved:
                self.faults.append(f"{run}: the destructive tool ran {wipes} times on {approved} approvals")
            for at, mark in starts[run] + [(at, mark) for _, at, mark in tools[run]]:
                task = mark.split("/")[1]
                if task in success and at > success[task]:
                    self.faults.append(f"{run}: task {task} started work at {at}, after its success at {success[task]}")
        return succeeded_tasks


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runner", default=str(ROOT / "target" / "release" / "runner"))
    parser.add_argument("--database", default=os.environ.get("RUNNER_TEST_DATABASE_URL", DEFAULT_DATABASE))
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--commands", type=int, default=6, help="command tasks in each run")
    parser.add_argument("--seconds", type=float, default=0.3, help="how long each command task takes")
    parser.add_argument("--latency", type=float, default=0.2, help="the fake server's answer time, seconds")
    parser.add_argument("--kill-every", type=float, default=3.0)
    parser.add_argument("--cut-after", type=float, default=8.0, help="seconds until the database is cut")
    parser.add_argument("--cut-seconds", type=float, default=3.0)
    parser.add_argument("--lease-ms", type=int, default=1500)
    parser.add_argument("--deadline", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the folder and the schema")
    parser.add_argument("--quick", action="store_true", help="the CI variant: 40 short runs, kills every 2 s")
    args = parser.parse_args()
    if args.quick:
        args.commands, args.seconds, args.latency, args.kill_every, args.cut_after = 3, 0.1, 0.1, 2.0, 5.0
        args.deadline = min(args.deadline, 150.0)
    args.runner = str(Path(args.runner).resolve())
    if not Path(args.runner).is_file():
        print(f"cluster soak: no runner binary at {args.runner} (cargo build --release -p runner)", file=sys.stderr)
        return 2
    args.seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"cluster soak: seed {args.seed}", file=sys.stderr)
    return Soak(args).run()


if __name__ == "__main__":
    sys.exit(main())
