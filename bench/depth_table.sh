#!/usr/bin/env bash
# Long conversations (issue 28): per depth D of history, the warm turn (TTFT of ~165 new
# prompt tokens on top of D reused ones), decode speed at D, and the cold prefill of D
# tokens, with warmstart's peak RSS. Writes bench/results/depth-STAMP.md. Never run in CI.
#
#   bench/depth_table.sh [-m MODEL.gguf] [-d "1024 4096 16384 32768"] [-t THREADS] [-k "f16"] [-w 165]
#   -k: KV cache types to run (each gets its own rows; RSS shows what the type saves)
set -euo pipefail
cd "$(dirname "$0")/.."
model=bench/models/lfm2-bench-q8_0.gguf; depths="1024 4096 16384 32768"; threads=$(nproc); kvs="f16"; warm=165
while getopts "m:d:t:k:w:" o; do
  case $o in m) model=$OPTARG ;; d) depths=$OPTARG ;; t) threads=$OPTARG ;; k) kvs=$OPTARG ;; w) warm=$OPTARG ;; *) exit 2 ;; esac
done
ws=${WARMSTART:-./build/warmstart}
mkdir -p bench/results
out="bench/results/depth-$(date -u +%Y%m%d-%H%M%S).md"
rss=$(mktemp)
# One `warmstart bench` per depth and KV type: it fills the history once (the cold prefill,
# timed), then the warm turn and the decode each start from a fork of it.
# Prints "warm_turn_t/s decode_t/s cold_prefill_t/s peak_rss_MiB".
run() {
  local json
  json=$(/usr/bin/time -f %M -o "$rss" "$ws" bench -m "$model" -t "$threads" -r 1 --json "$@")
  echo "$(echo "$json" | /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.2f %.2f %.2f" % (r[0]["avg_ts"], r[1]["avg_ts"], r[0]["depth_prefill_ts"]))') $(( $(cat "$rss") / 1024 ))"
}
{
  echo "# warmstart at depth: $(basename "$model"), $threads threads, $(date -u '+%Y-%m-%d %H:%M') UTC"
  echo
  echo "CPU flags: $(grep -m1 -o -w -E 'avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo
  echo "| KV | history | warm turn: pp$warm t/s | warm-turn TTFT s | decode t/s | cold prefill t/s | cold prefill s | peak RSS MiB |"
  echo "|---|---|---|---|---|---|---|---|"
} | tee "$out"
for kv in $kvs; do
  for d in $depths; do
    read -r pp tg cold mib < <(run -p "$warm" -n 32 -d "$d" --kv-type "$kv")
    printf "| %s | %d | %s | %.3f | %s | %s | %.1f | %s |\n" "$kv" "$d" "$pp" "$(echo "$warm / $pp" | bc -l)" "$tg" \
      "$cold" "$(echo "$d / $cold" | bc -l)" "$mib" | tee -a "$out"
  done
done
rm -f "$rss"
echo "-> $out"
