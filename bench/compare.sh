#!/usr/bin/env bash
# warmstart vs llama.cpp (node-llama-cpp@3.21.1, bench/peer) on the same generated
# bench-preset models, the two run alternately (round-robin, one test at a time) so a
# noisy shared machine slows both alike. Prints a ratio table (warmstart ÷ peer
# throughput) and writes it with the raw JSON to bench/results/. Never run in CI.
#
#   bench/compare.sh [-t THREADS] [-r REPS] [-k ROUNDS] [-p 512,2048] [-n 128] [-d DEPTH]
#                    [-a "llama lfm2 granitehybrid mamba2 gemma3"] [-q "f16 q8_0 q4_k_m"]
#   -d: every test starts from a context already holding DEPTH tokens (llama-bench's -d)
#   -F: the peer runs with flash attention (llama-server's default on the CPU), else
#       without (node-llama-cpp's default)
#   -P: the peer's folder (default bench/peer); bench/peer_variant.sh makes one whose
#       llama.cpp can only load one CPU variant (say haswell: AVX2, no AVX-512)
#   WARMSTART_ISA=avx2 in the environment takes warmstart's AVX2 path likewise
set -euo pipefail
cd "$(dirname "$0")/.."
threads=$(nproc); reps=3; rounds=2; prompts=512,2048; gen=128; depth=0
archs="llama lfm2 granitehybrid mamba2 gemma3"; types="f16 q8_0 q4_k_m"; peer=bench/peer; peer_flags=()
while getopts "t:r:k:p:n:d:a:q:P:F" o; do
  case $o in
    t) threads=$OPTARG ;; r) reps=$OPTARG ;; k) rounds=$OPTARG ;; p) prompts=$OPTARG ;;
    n) gen=$OPTARG ;; d) depth=$OPTARG ;; a) archs=$OPTARG ;; q) types=$OPTARG ;; P) peer=$OPTARG ;;
    F) peer_flags=(--fa) ;; *) exit 2 ;;
  esac
done
ws=${WARMSTART:-./build/warmstart}
[ -x "$ws" ] || { echo "build warmstart first ($ws)"; exit 1; }
[ -d "$peer/node_modules/node-llama-cpp" ] || (cd "$peer" && npm i -E node-llama-cpp@3.21.1 --no-audit --no-fund)
mkdir -p bench/models bench/results
stamp=$(date -u +%Y%m%d-%H%M%S)
raw="bench/results/compare-$stamp.jsonl"
: > "$raw"

model_path() {  # ARCH TYPE -> path, generating / quantizing on first use
  local f16="bench/models/$1-bench-f16.gguf" out="bench/models/$1-bench-$2.gguf"
  [ -f "$f16" ] || /usr/bin/python3 ../shared/tools/mkmodel.py --arch "$1" --preset bench --out "$f16" >&2
  [ -f "$out" ] || "$ws" quantize "$f16" "$out" "${2^^}" >&2
  echo "$out"
}

# One engine, one test, appended to $raw as {"engine", "arch", "type", ...llama-bench fields}.
# Peak RSS of the whole process (/usr/bin/time), recorded with each test: the peer's
# includes the Node.js runtime (~50 MB).
run_one() {  # ENGINE ARCH TYPE MODEL P N
  local json rss_file; rss_file=$(mktemp)
  if [ "$1" = warmstart ]; then
    json=$(/usr/bin/time -f %M -o "$rss_file" "$ws" bench -m "$4" -p "$5" -n "$6" -d "$depth" -t "$threads" -r "$reps" --json)
  else
    json=$(/usr/bin/time -f %M -o "$rss_file" node "$peer/bench.mjs" -m "$4" -p "$5" -n "$6" -d "$depth" -t "$threads" -r "$reps" "${peer_flags[@]}" --json)
  fi
  /usr/bin/python3 -c 'import json,sys; [print(json.dumps({"engine": sys.argv[1], "arch": sys.argv[2], "type": sys.argv[3], "peak_rss_kb": int(sys.argv[4]), **r})) for r in json.loads(sys.stdin.read())]' \
    "$1" "$2" "$3" "$(tail -n1 "$rss_file")" <<<"$json" >> "$raw"
  rm -f "$rss_file"
}

for arch in $archs; do
  for type in $types; do
    m=$(model_path "$arch" "$type")
    tests=()
    for p in ${prompts//,/ }; do [ "$p" -gt 0 ] && tests+=("$p 0"); done
    [ "$gen" -gt 0 ] && tests+=("0 $gen")
    for ((k = 0; k < rounds; ++k)); do
      for t in "${tests[@]}"; do
        set -- $t
        # Alternate which engine goes first, so neither always gets the quieter slot.
        if (( k % 2 == 0 )); then order="warmstart peer"; else order="peer warmstart"; fi
        for e in $order; do
          echo "[$arch $type round $k] $e pp$1 tg$2" >&2
          run_one "$e" "$arch" "$type" "$m" "$1" "$2" || echo "  failed: $e $arch $type" >&2
        done
      done
    done
  done
done

COMPARE_PEER="$peer ${peer_flags[*]}" /usr/bin/python3 bench/summarize_compare.py "$raw" | tee "bench/results/compare-$stamp.md"
