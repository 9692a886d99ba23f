#!/usr/bin/env bash
# Rebuilds warmstart's embedded chat model from scratch, with fixed seeds:
#   synthetic conversations -> BPE tokenizer -> lfm2 training (PyTorch, CPU, 1 thread)
#   -> models/warmstart-chat.gguf (F16) + models/warmstart-chat.ref.{json,f32} (test reference)
#   + tests/data/chat_heldout.jsonl (held-out conversations for the recall test).
#
# Dependencies (Debian 12): apt-get install python3-torch python3-regex python3-numpy
# Optional, much faster (Debian's torch otherwise uses the reference BLAS):
#   apt-get install libopenblas0-pthread  (used for this script only, via LD_LIBRARY_PATH)
# Takes about 50 minutes on one (shared) core. Intermediate files go to build-train/.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=/usr/bin/python3
work=build-train
mkdir -p "$work" models tests/data

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread
if [ -e "$openblas/libblas.so.3" ]; then export LD_LIBRARY_PATH="$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi

t=tools/train
$py $t/gen_data.py --split train --count 30000 --seed 1 --out "$work/train.jsonl"
$py $t/gen_data.py --split heldout --count 40 --seed 7 --out tests/data/chat_heldout.jsonl
$py $t/train_bpe.py --data "$work/train.jsonl" --conversations 8000 --vocab 1536 --out "$work/tokenizer.json"
start=$(date +%s)
# Three phases of 450, 500 and 350 steps, each a warmup + cosine schedule; each later
# phase starts from the previous weights and sees the batches in another order (seed).
# This is how the committed model was trained (the split reflects the time available
# when it was made, not a requirement).
arch=(--n-embd 128 --n-ff 384 --n-head 4 --n-head-kv 2 --n-layer 6 --attn-layers 2,5 --batch-tokens 4096 --lr 3e-3)
train() { $py $t/train.py --data "$work/train.jsonl" --tokenizer "$work/tokenizer.json" "${arch[@]}" "$@"; }
train --out "$work/model-phase1.pt" --steps 450 --seed 1 | tee "$work/train-phase1.log"
train --out "$work/model-phase2.pt" --steps 500 --seed 2 --init-from "$work/model-phase1.pt" | tee "$work/train-phase2.log"
train --out "$work/model.pt" --steps 350 --seed 3 --init-from "$work/model-phase2.pt" | tee "$work/train.log"
echo "training took $(( $(date +%s) - start )) s"
$py $t/export_gguf.py --checkpoint "$work/model.pt" --tokenizer "$work/tokenizer.json" \
  --out models/warmstart-chat.gguf --mkmodel ../shared/tools/mkmodel.py
$py $t/make_reference.py --checkpoint "$work/model.pt" --tokenizer "$work/tokenizer.json" \
  --out models/warmstart-chat.ref
ls -l models/
