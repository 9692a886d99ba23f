#!/usr/bin/env bash
# Multi-turn TTFT, warmstart vs llama.cpp: ../shared/tools/turnbench.py against `warmstart serve`
# and against bench/peer/server.mjs (node-llama-cpp@3.21.1 behind the same OpenAI API, one
# slot, llama.cpp's prefix reuse and checkpoints), same seed and options, the engine that goes
# first alternating per run. Writes the raw JSON lines and a table (bench/summarize_turns.py)
# to bench/results/turns-STAMP.{jsonl,md}. Never run in CI.
#
#   bench/compare_turns.sh [-t THREADS] [-a "llama lfm2 granitehybrid mamba2 gemma3"] [-q "f16 q8_0"]
#                          [-s "append edit interleave"] [-n TURNS] [-e EDIT_AT] [-k ROUNDS]
#                          [-m MODEL.gguf] [-- extra turnbench.py flags]
#   -m: one model file instead of the -a x -q bench models (labelled by its file name)
#   -e: the turn at which the edit scenario edits the 2nd user message (default min(8, TURNS))
#   -k: rounds per model and scenario (default 1), the engines alternating within each; the
#       table then shows medians over rounds, which this noisy kind of machine needs
# Uses build/warmstart (override with WARMSTART=...); generates missing bench models as compare.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=$(nproc); archs="llama lfm2 granitehybrid mamba2 gemma3"; types="f16 q8_0"
scenarios="append edit interleave"; turns=12; edit_at=""; model=""; rounds=1
while getopts "t:a:q:s:n:e:k:m:" o; do
  case $o in
    t) threads=$OPTARG ;; a) archs=$OPTARG ;; q) types=$OPTARG ;; s) scenarios=$OPTARG ;;
    n) turns=$OPTARG ;; e) edit_at=$OPTARG ;; k) rounds=$OPTARG ;; m) model=$OPTARG ;; *) exit 2 ;;
  esac
done
shift $((OPTIND - 1)); [ "${1:-}" = "--" ] && shift
extra=("$@")
edit_at=${edit_at:-$(( turns < 8 ? turns : 8 ))}
# turnbench edits only once the 2nd user message exists, i.e. from turn 3 on.
[[ " $scenarios " != *" edit "* ]] || (( edit_at >= 3 && edit_at <= turns )) || { echo "-e must be in 3..$turns"; exit 2; }
ws=${WARMSTART:-./build/warmstart}
[ -x "$ws" ] || { echo "build warmstart first ($ws)"; exit 1; }
[ -d bench/peer/node_modules/node-llama-cpp ] || (cd bench/peer && npm i -E node-llama-cpp@3.21.1 --no-audit --no-fund)
mkdir -p bench/models bench/results
stamp=$(date -u +%Y%m%d-%H%M%S)
raw="bench/results/turns-$stamp.jsonl"
logs="$(mktemp -d /tmp/ws-compare-turns-XXXXXX)"
server_pid=""; url=""
stop_server() { [ -z "$server_pid" ] || { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true; server_pid=""; }; }
trap 'stop_server; rm -rf "$logs"' EXIT

printf '{"meta": true, "threads": %d, "turns": %d, "edit_at": %d, "rounds": %d, "warmstart": "%s at %s", "peer": "node-llama-cpp@3.21.1"}\n' \
  "$threads" "$turns" "$edit_at" "$rounds" "$ws" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" > "$raw"

model_path() {  # ARCH TYPE -> path, generating / quantizing on first use
  local f16="bench/models/$1-bench-f16.gguf" out="bench/models/$1-bench-$2.gguf"
  [ -f "$f16" ] || /usr/bin/python3 ../shared/tools/mkmodel.py --arch "$1" --preset bench --out "$f16" >&2
  [ -f "$out" ] || "$ws" quantize "$f16" "$out" "${2^^}" >&2
  echo "$out"
}

# Starts ENGINE on MODEL; sets server_pid, and url once it listens.
start_server() {  # ENGINE MODEL
  local log="$logs/$1.log"; url=""
  if [ "$1" = warmstart ]; then
    "$ws" serve -m "$2" --port 0 -t "$threads" -c 8192 2>"$log" &
  else
    node bench/peer/server.mjs -m "$2" --port 0 -t "$threads" -c 8192 2>"$log" &
  fi
  server_pid=$!
  for _ in $(seq 1200); do
    url="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -n1 || true)"
    [ -n "$url" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log" >&2; stop_server; return 1
}

run_one() {  # ENGINE ARCH TYPE SCENARIO MODEL ROUND
  start_server "$1" "$5" || return 1
  # One tiny request first, so that neither engine's turn 1 pays for page faults and thread start-up.
  curl -s -o /dev/null "$url/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}' || true
  local rc=0
  /usr/bin/python3 ../shared/tools/turnbench.py --url "$url" --scenario "$4" --turns "$turns" \
    --edit-at "$edit_at" --label "$1" "${extra[@]}" |
    /usr/bin/python3 -c 'import json, sys; [print(json.dumps({"engine": sys.argv[1], "arch": sys.argv[2], "type": sys.argv[3], "round": int(sys.argv[4]), **json.loads(l)})) for l in sys.stdin if l.strip()]' \
      "$1" "$2" "$3" "$6" >> "$raw" || rc=1
  stop_server
  return $rc
}

runs=()  # "ARCH TYPE MODEL"
if [ -n "$model" ]; then
  runs+=("$(basename "$model" .gguf) - $model")
else
  for arch in $archs; do for type in $types; do runs+=("$arch $type $(model_path "$arch" "$type")"); done; done
fi
k=0
for r in "${runs[@]}"; do
  read -r arch type m <<<"$r"
  for s in $scenarios; do
    for round in $(seq "$rounds"); do
      # Alternate which engine goes first, so neither always gets the quieter slot.
      if (( k++ % 2 == 0 )); then order="warmstart peer"; else order="peer warmstart"; fi
      for e in $order; do
        echo "[$arch $type $s round $round] $e" >&2
        run_one "$e" "$arch" "$type" "$s" "$m" "$round" || echo "  failed: $e $arch $type $s" >&2
      done
    done
  done
done

/usr/bin/python3 bench/summarize_turns.py "$raw" | tee "bench/results/turns-$stamp.md"
