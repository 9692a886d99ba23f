#!/usr/bin/env bash
# Prompt (512 tokens) and generation speed of `warmstart run` on bench-preset models.
# Never run in CI. Usage: bench/run_speed.sh [ARCH] [THREADS]   (default: llama, all cores)
# Generates bench/models/ARCH-bench-f16.gguf with ../shared/tools/mkmodel.py and a Q8_0
# copy with `warmstart quantize`, then prints warmstart's own timing lines.
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:-llama}"
threads="${2:-$(nproc)}"
mkdir -p bench/models
f16="bench/models/$arch-bench-f16.gguf"
q8="bench/models/$arch-bench-q8_0.gguf"
[ -f "$f16" ] || /usr/bin/python3 ../shared/tools/mkmodel.py --arch "$arch" --preset bench --out "$f16"
[ -f "$q8" ] || ./build/warmstart quantize "$f16" "$q8" Q8_0
# A 512-token prompt: 512 fixed ordinary token ids.
prompt_ids=$(/usr/bin/python3 -c "import random; r=random.Random(7); print(','.join(str(r.randrange(8000)) for _ in range(512)))")
for model in "$f16" "$q8"; do
  echo "== $model ($threads threads)"
  ./build/warmstart run -m "$model" --tokens "$prompt_ids" -n 32 -t "$threads" 2>&1 | tail -n 2
done
