#!/usr/bin/env bash
# Installs what is missing, builds, and runs warmstart's main job: for now a short
# generation on a fixture model from ../shared (random weights, so the text is noise;
# the point is the pipeline: GGUF -> tokenizer -> model -> sampler -> streamed text).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
model="${1:-../shared/fixtures/models/llama-q256-q8_0.gguf}"
./build/warmstart run -m "$model" -p "<|im_start|>user
Hello! Who are you?<|im_end|>
<|im_start|>assistant
" -n 48 --temp 0.7 --seed 42
