#!/usr/bin/env python3
"""`runner serve` on a 10,000-task run, in headless Chromium driven over WebDriver: how long
the page of a finished run takes to load (until its graph and timeline are drawn), and for a
run watched while it runs, its load time and how responsive the page stays while events
stream in (the longest gap between animation frames, and how many gaps exceed 100 ms).

    cargo build --release -p runner
    python3 benches/serve.py                   # 10,000 tasks, layered, 5 loads
    python3 benches/serve.py --tasks 1000 --runner target/debug/runner

Needs chromium and chromedriver on the PATH (apt-get install chromium chromium-driver).
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commands import plan_text  # noqa: E402

DONE = ("return document.querySelectorAll('#graph .node').length > 0"
        " && !!document.querySelector('#timeline svg') && !!document.querySelector('#run-status .badge')")
# Records the longest gap between animation frames from now on.
MONITOR = """
window.gaps = {max: 0, slow: 0, frames: 0};
let last = performance.now();
const tick = (now) => {
  const gap = now - last; last = now; window.gaps.frames++;
  if (gap > window.gaps.max) window.gaps.max = gap;
  if (gap > 100) window.gaps.slow++;
  requestAnimationFrame(tick);
};
requestAnimationFrame(tick);
return true;
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Driver:
    def __init__(self):
        self.port = free_port()
        self.process = subprocess.Popen(["chromedriver", f"--port={self.port}"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(100):
            try:
                self.call("GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        self.profile = tempfile.mkdtemp()
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", f"--user-data-dir={self.profile}"]
        session = self.call("POST", "/session", {"capabilities": {"alwaysMatch": {
            "goog:chromeOptions": {"args": args}}}})
        self.base += "/session/" + session["sessionId"]

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.load(response)["value"]

    def run(self, script):
        return self.call("POST", "/execute/sync", {"script": script, "args": []})

    def go(self, url):
        self.call("POST", "/url", {"url": url})

    def wait(self, script, limit=120):
        started = time.monotonic()
        while not self.run(script):
            if time.monotonic() - started > limit:
                raise TimeoutError(script)
            time.sleep(0.02)

    def close(self):
        try:
            self.call("DELETE", "")
        finally:
            self.process.kill()
            shutil.rmtree(self.profile, ignore_errors=True)


def load_time(driver, url):
    driver.go("about:blank")
    started = time.monotonic()
    driver.go(url)
    driver.wait(DONE)
    return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runner", default="target/release/runner")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    runner = os.path.abspath(args.runner)
    folder = tempfile.mkdtemp()
    env = dict(os.environ, RUNNER_HOME=os.path.join(folder, "home"), NO_COLOR="1")
    text = plan_text("layered", args.tasks)
    with open(os.path.join(folder, "done.yaml"), "w") as f:
        f.write(text)
    # The watched run takes a little while per task, so there is a run to watch.
    with open(os.path.join(folder, "live.yaml"), "w") as f:
        f.write(text.replace("{runtime: mock, default: ok}", "{runtime: mock, latency: 30ms, default: ok}"))
    subprocess.run([runner, "apply", "done.yaml", "--yes", "--run-id", "done"], cwd=folder, env=env,
                   stdout=subprocess.DEVNULL, check=True)
    log = os.path.join(folder, "home", "runs", "done", "events.jsonl")
    print(f"{args.tasks} tasks, {sum(1 for _ in open(log))} events, log {os.path.getsize(log) / 1e6:.1f} MB")
    server = subprocess.Popen([runner, "serve", "--addr", "127.0.0.1:0"], cwd=folder, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = server.stdout.readline().split()[2].rstrip("/")
    driver = Driver()
    try:
        times = [load_time(driver, f"{url}/#/run/done") for _ in range(args.loads)]
        print("finished run, page load: " + ", ".join(f"{t:.2f} s" for t in times)
              + f" (median {sorted(times)[len(times) // 2]:.2f} s)")
        apply = subprocess.Popen([runner, "apply", "live.yaml", "--yes", "--run-id", "live"], cwd=folder, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        live_log = os.path.join(folder, "home", "runs", "live", "events.jsonl")
        while not os.path.exists(live_log):
            time.sleep(0.01)
        loaded = load_time(driver, f"{url}/#/run/live")
        driver.run(MONITOR)
        started = time.monotonic()
        apply.wait()
        ran = time.monotonic() - started
        driver.wait("return document.querySelector('#run-status').textContent.startsWith('succeeded')")
        gaps = driver.run("return window.gaps")
        events = driver.run("return document.getElementById('replay').max")
        print(f"live run, page load: {loaded:.2f} s; while {events} events streamed over {ran:.1f} s: "
              f"{gaps['frames']} frames, longest gap {gaps['max']:.0f} ms, {gaps['slow']} gaps over 100 ms")
    finally:
        driver.close()
        server.kill()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
