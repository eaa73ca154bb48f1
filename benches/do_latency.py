#!/usr/bin/env python3
"""Plan-and-execute against plan-then-run: the wall time from the request to the end of the
run for `runner do` and for `runner plan --lines --stream` followed by `runner apply --yes`, on the
same scripted model answer.

A local fake OpenAI-compatible server streams a plan of N tasks, one NDJSON line every GAP
seconds (the header first). Each task is a command agent that sleeps WORK seconds, and each
depends on the one before, so with `runner do` task i starts as soon as line i has arrived
while the model writes the rest; with plan-then-run nothing starts before the last line.

    cargo build --release -p runner
    python3 benches/do_latency.py                   # 5 tasks, 2 s apart, 2 s of work each
    python3 benches/do_latency.py --tasks 8 --gap 1 --work 1

Prints each command's wall time, exit code, and the ratio plan-then-run / do.
"""

import argparse
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = os.path.join(ROOT, "target", "release", "runner")


def lines(tasks, work):
    out = [json.dumps({"plan": {"name": "chain", "mission": "a chain of work"}})]
    for i in range(tasks):
        task = {"id": f"t{i}", "agent": "sleeper", "input": f"step {i}"}
        if i:
            task["depends_on"] = [f"t{i - 1}"]
        out.append(json.dumps({"task": task}))
    return out


def handler(answer, gap):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length) or b"{}")
            if not request.get("stream"):
                text = "\n".join(answer)
                body = json.dumps({
                    "id": "x", "object": "chat.completion", "model": "fake-model",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                }).encode()
                time.sleep(gap * len(answer))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()

            def event(delta, finish=None):
                chunk = {"id": "x", "object": "chat.completion.chunk", "model": "fake-model",
                         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

            event({"role": "assistant"})
            for line in answer:
                time.sleep(gap)
                event({"content": line + "\n"})
            event({}, "stop")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def timed(args, folder, env):
    started = time.monotonic()
    done = subprocess.run([RUNNER, *args], cwd=folder, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        print(f"`runner {' '.join(args)}` exited {done.returncode}:\n{done.stderr}", file=sys.stderr)
    return elapsed, done.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between the model's lines")
    parser.add_argument("--work", type=float, default=2.0, help="seconds each task works")
    options = parser.parse_args()
    if not os.path.exists(RUNNER):
        sys.exit(f"build it first: cargo build --release -p runner ({RUNNER} is missing)")
    answer = lines(options.tasks, options.work)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler(answer, options.gap))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "agents.yaml"), "w") as template:
            template.write(
                "apiVersion: runner/v1\nkind: Plan\nmetadata: {name: agents}\nspec:\n  mission: agents\n"
                f"  agent_definitions:\n    sleeper: {{runtime: command, command: [sleep, '{options.work}']}}\n"
                "  workflow:\n    - {id: placeholder, agent: sleeper, input: x}\n"
            )
        env = dict(os.environ, RUNNER_HOME=os.path.join(folder, "home"), NO_COLOR="1")
        common = ["--provider", url, "--model", "fake-model", "--template", "agents.yaml"]
        request = "Do a chain of work"
        do_time, do_code = timed(["do", request, *common], folder, env)
        plan_time, plan_code = timed(["plan", request, *common, "--lines", "--stream", "-o", "plan.yaml"], folder, env)
        apply_time, apply_code = timed(["apply", "plan.yaml", "--yes"], folder, env)
    server.shutdown()
    both = plan_time + apply_time
    print(f"{options.tasks} tasks, a line every {options.gap:g} s, {options.work:g} s of work each")
    print(f"runner do:                  {do_time:6.2f} s (exit {do_code})")
    print(f"runner plan + runner apply: {both:6.2f} s = {plan_time:.2f} + {apply_time:.2f} (exit {plan_code}, {apply_code})")
    print(f"plan-then-run / do:         {both / do_time:6.2f}x")


if __name__ == "__main__":
    main()
