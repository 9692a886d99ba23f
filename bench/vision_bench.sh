#!/usr/bin/env bash
# Per-turn TTFT with an image in turn 1 (then TURNS-1 text turns), prefix + encoder cache
# on vs off, on a vision fixture pair scaled up with mkmodel.py --set. Never run in CI.
# usage: bench/vision_bench.sh [PROJECTOR] [TURNS] [THREADS]
#   PROJECTOR: idefics3 (llama LM) | lfm2 (lfm2 LM) | gemma3 (gemma3 LM); default lfm2
# Models go to bench/models/vl-*-bench-*.gguf (generated when missing); the binary is
# build-vis/bench/vision_bench (override with WS_VISION_BENCH=...).
set -euo pipefail
cd "$(dirname "$0")/.."
proj="${1:-lfm2}"; turns="${2:-4}"; threads="${3:-$(nproc)}"
case "$proj" in idefics3) lm_arch=llama ;; lfm2) lm_arch=lfm2 ;; gemma3) lm_arch=gemma3 ;;
  *) echo "unknown projector $proj" >&2; exit 2 ;; esac
bin="${WS_VISION_BENCH:-./build-vis/bench/vision_bench}"
mk=(/usr/bin/python3 ../shared/tools/mkmodel.py)
mkdir -p bench/models
lm="bench/models/vl-$lm_arch-bench-lm.gguf"
mm="bench/models/vl-$proj-bench-mmproj.gguf"
# A larger LM (512 wide, 1536 FFN) and a 12-layer, 384-wide vision tower projecting to it.
[ -f "$lm" ] || "${mk[@]}" --arch "$lm_arch" --preset vl-tiny --dtype f16 --set n_embd=512 --set n_ff=1536 \
  --set head_dim=128 --out "$lm"
[ -f "$mm" ] || "${mk[@]}" --arch clip --projector "$proj" --preset tiny --dtype f16 --set n_layer=12 \
  --set n_embd=384 --set n_head=6 --set n_ff=1536 --set n_embd_text=512 --set proj_hidden=512 --out "$mm"
"$bin" "$lm" "$mm" ../shared/fixtures/images/shapes-256.png "$turns" "$threads"
