#!/usr/bin/env bash
# Rebuilds warmstart's embedded chat model from scratch, with fixed seeds:
#   synthetic conversations -> BPE tokenizer -> lfm2 training (PyTorch, CPU, 2 threads)
#   -> models/warmstart-chat.gguf (F16) + models/warmstart-chat.ref.{json,f32} (test reference)
#   + tests/data/chat_heldout.jsonl (held-out conversations for the recall test).
#
# Dependencies (Debian 12): apt-get install python3-torch python3-regex python3-numpy
# Optional, much faster (Debian's torch otherwise uses the reference BLAS):
#   apt-get install libopenblas0-pthread  (used for this script only, via LD_LIBRARY_PATH)
# Takes about 80 minutes on two cores. Intermediate files go to build-train/.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=/usr/bin/python3
work=build-train
mkdir -p "$work" models tests/data

export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread
if [ -e "$openblas/libblas.so.3" ]; then export LD_LIBRARY_PATH="$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi

t=tools/train
$py $t/gen_data.py --split heldout --per-length 60 --seed 7 --out tests/data/chat_heldout.jsonl
$py $t/gen_data.py --split train --count 60000 --seed 1 --out "$work/train.jsonl"
$py $t/gen_data.py --split train --augment --count 60000 --seed 3 --out "$work/train-augmented.jsonl"
$py $t/train_bpe.py --data "$work/train.jsonl" --conversations 8000 --vocab 1536 --out "$work/tokenizer.json"
start=$(date +%s)
# Three phases, each a warmup + cosine schedule from the previous phase's weights. Phase 1's
# schedule was planned for 1100 steps of 8192 tokens and stopped at 600, where the loss had
# flattened (the model had not learned to copy yet); phase 2 takes steps of 4096 tokens
# (twice the updates for the same time: copying appears around its step 300); phase 3
# trains on the augmented conversations (more frames, noise around the messages).
# This is how the committed model was made.
arch=(--n-embd 160 --n-ff 448 --n-head 4 --n-head-kv 2 --n-layer 6 --attn-layers 1,3,5 --max-len 1024 --threads 2
      --tokenizer "$work/tokenizer.json" --save-every 100)
$py $t/train.py "${arch[@]}" --data "$work/train.jsonl" --batch-tokens 8192 --lr 3e-3 --steps 1100 --stop-after 600 \
  --seed 1 --out "$work/model-phase1.pt" | tee "$work/train-phase1.log"
$py $t/train.py "${arch[@]}" --data "$work/train.jsonl" --batch-tokens 4096 --lr 2e-3 --steps 1300 \
  --seed 2 --init-from "$work/model-phase1.pt" --out "$work/model-phase2.pt" | tee "$work/train-phase2.log"
$py $t/train.py "${arch[@]}" --data "$work/train-augmented.jsonl" --batch-tokens 4096 --lr 1.5e-3 --steps 800 \
  --seed 3 --init-from "$work/model-phase2.pt" --out "$work/model.pt" | tee "$work/train.log"
echo "training took $(( $(date +%s) - start )) s"
$py $t/export_gguf.py --checkpoint "$work/model.pt" --tokenizer "$work/tokenizer.json" \
  --out models/warmstart-chat.gguf --mkmodel ../shared/tools/mkmodel.py
$py $t/make_reference.py --checkpoint "$work/model.pt" --tokenizer "$work/tokenizer.json" \
  --out models/warmstart-chat.ref
ls -l models/
if [ -x build/warmstart ]; then $py $t/eval_skills.py; fi
