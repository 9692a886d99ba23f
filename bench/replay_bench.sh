#!/usr/bin/env bash
# Cross-turn reuse bench (never in CI): per-turn TTFT and RSS of `warmstart replay` on
# bench-preset models in Q8_0, cache on (all scenarios) and off (append), and each warm
# turn's TTFT over the time to compute only its new tokens (ttft_ratio; 1.0 is the limit).
# usage: bench/replay_bench.sh [ARCH ...] (default: lfm2 gemma3 llama); THREADS env (default
# nproc); REPS env (default 1): runs of each cache-on scenario, summarized per turn by medians
# (STAT=min: by minima, which suit a shared VM whose noise only adds time)
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${THREADS:-$(nproc)}"
reps="${REPS:-1}"
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(lfm2 gemma3 llama)
mkdir -p bench/models bench/results
/usr/bin/python3 bench/make_replay_scripts.py bench/models/scripts >/dev/null
for arch in "${archs[@]}"; do
  f16="bench/models/$arch-bench-f16.gguf"; q8="bench/models/$arch-bench-q8_0.gguf"
  [ -f "$f16" ] || /usr/bin/python3 ../shared/tools/mkmodel.py --arch "$arch" --preset bench --out "$f16"
  [ -f "$q8" ] || ./build/warmstart quantize "$f16" "$q8" Q8_0
  for sc in append edit interleave strip agent; do
    outs=()
    for r in $(seq "$reps"); do
      out="bench/results/replay-$arch-$sc-cache-on$([ "$reps" -gt 1 ] && echo "-$r").jsonl"
      ./build/warmstart replay -m "$q8" --script "bench/models/scripts/$sc.jsonl" --json --ideal -t "$threads" -c 8192 > "$out"
      outs+=("$out")
    done
    /usr/bin/python3 bench/summarize_replay.py "$arch" "$sc" on "${outs[@]}"
  done
  out="bench/results/replay-$arch-append-cache-off.jsonl"
  ./build/warmstart replay -m "$q8" --script bench/models/scripts/append.jsonl --json --cache off -t "$threads" -c 8192 > "$out"
  /usr/bin/python3 bench/summarize_replay.py "$arch" append off "$out"
done
