#!/usr/bin/env bash
# Multi-turn TTFT of `warmstart serve` with the prefix cache on and off, measured by
# ../shared/tools/turnbench.py (an OpenAI-compatible multi-turn client). Never run in CI.
# usage: bench/turnbench.sh [ARCH] [SCENARIO] [TURNS] [THREADS] [-- extra turnbench.py flags]
#   ARCH: a mkmodel.py architecture with a bench preset (default lfm2)
#   SCENARIO: append | edit | interleave | strip (default append)
# Generates bench/models/ARCH-bench-f16.gguf if missing; uses build/warmstart (override
# with WS_BIN=...; another model with WS_MODEL=...). Prints one line per turn: TTFT and cached tokens, cache on vs off.
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:-lfm2}"; scenario="${2:-append}"; turns="${3:-8}"; threads="${4:-$(nproc)}"
shift $(( $# < 4 ? $# : 4 )); [ "${1:-}" = "--" ] && shift
bin="${WS_BIN:-./build/warmstart}"
model="${WS_MODEL:-bench/models/$arch-bench-f16.gguf}"
mkdir -p bench/models
[ -f "$model" ] || /usr/bin/python3 ../shared/tools/mkmodel.py --arch "$arch" --preset bench --out "$model"
out="$(mktemp -d /tmp/ws-turnbench-XXXXXX)"
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT

run_one() {  # $1 = on|off, then extra turnbench.py flags
  local mode="$1"; shift
  local budget=(); [ "$mode" = off ] && budget=(--cache-budget-mb 0)
  "$bin" serve -m "$model" --port 0 -t "$threads" -c 8192 "${budget[@]}" 2>"$out/serve-$mode.log" &
  server_pid=$!
  local url=""
  for _ in $(seq 600); do
    url="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$out/serve-$mode.log" | head -n1 || true)"
    [ -n "$url" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$out/serve-$mode.log"; exit 1; }
    sleep 0.1
  done
  /usr/bin/python3 ../shared/tools/turnbench.py --url "$url" --scenario "$scenario" --turns "$turns" \
    --label "cache-$mode" "$@" >"$out/cache-$mode.jsonl"
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
}

extra=("$@")
run_one on "${extra[@]}"
run_one off "${extra[@]}"
echo "== $model, scenario $scenario, $turns turns, $threads threads"
/usr/bin/python3 - "$out/cache-on.jsonl" "$out/cache-off.jsonl" <<'PY'
import json, sys
def load(p):
    rows = [json.loads(l) for l in open(p) if l.strip()]
    return {(r["conv"], r["turn"]): r for r in rows if not r.get("summary")}, [r for r in rows if r.get("summary")]
on, on_sum = load(sys.argv[1]); off, off_sum = load(sys.argv[2])
print(f"{'conv':>4} {'turn':>4} {'prompt':>7} | {'ttft on ms':>10} {'cached':>7} | {'ttft off ms':>11} {'cached':>7} | speed-up")
for key in sorted(on):
    a, b = on[key], off.get(key, {})
    ta, tb = a["ttft_s"] * 1000, b.get("ttft_s", 0) * 1000
    print(f"{key[0]:>4} {key[1]:>4} {a.get('prompt_tokens') or 0:>7} | {ta:>10.1f} {a.get('cached_tokens') or 0:>7} | "
          f"{tb:>11.1f} {b.get('cached_tokens') or 0:>7} | {tb / ta if ta else 0:>6.2f}x")
for s in on_sum + off_sum:
    print(json.dumps(s))
PY
