#!/usr/bin/env bash
# Rebuilds warmstart's embedded chat model from scratch, with fixed seeds:
#   synthetic conversations -> BPE tokenizer -> lfm2 training (PyTorch, CPU, 2 threads)
#   -> models/warmstart-chat.gguf (F16) + models/warmstart-chat.ref.{json,f32} (test reference)
#   + tests/data/chat_heldout.jsonl (held-out conversations for the recall test).
#
# Dependencies (Debian 12): apt-get install python3-torch python3-regex python3-numpy
# Optional, much faster (Debian's torch otherwise uses the reference BLAS):
#   apt-get install libopenblas0-pthread  (used for this script only, via LD_LIBRARY_PATH)
# Training takes 90 minutes on a 2-core Intel Xeon VM with AVX512_BF16 (the whole script ~92;
# ~66 minutes on a 2-core Zen 5 VM with the recipe before, tools/train/README.md); intermediate
# files go to build-train/.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=/usr/bin/python3
work=build-train
mkdir -p "$work" models tests/data

export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread
if [ -e "$openblas/libblas.so.3" ]; then export LD_LIBRARY_PATH="$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
# Debian's torch picks its AVX2 kernels even on AVX-512 CPUs; the AVX-512 ones make a step ~10%
# faster. Only where the CPU has them (torch does not check, and would die of SIGILL).
if grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo; then
  export ATEN_CPU_CAPABILITY=avx512
fi

t=tools/train
$py $t/gen_data.py --split heldout --per-length 60 --seed 7 --out tests/data/chat_heldout.jsonl
# Two more held-out sets from pools written apart from gen_data.py (tests/data/*_pools.json,
# less whatever a training pool holds): how far the recipe was fitted to the first set.
$py $t/gen_data.py --split heldout --heldout-pools tests/data/chat_heldout2_pools.json --per-length 60 --seed 11 \
  --out tests/data/chat_heldout2.jsonl
$py $t/gen_data.py --split heldout --heldout-pools tests/data/chat_heldout3_pools.json --per-length 60 --seed 13 \
  --out tests/data/chat_heldout3.jsonl
# Set 4's pools were written after the committed model was trained, less every entry near()
# a phrasing of its training pools (filter_pools.py: so that adding them leaves both training sets as they were).
$py $t/gen_data.py --split heldout --heldout-pools tests/data/chat_heldout4_pools.json --per-length 60 --seed 17 \
  --out tests/data/chat_heldout4.jsonl
# Set 5: set 1's phrasings with names, cities, pets and items of several words and accented
# letters ("Jan van der Berg", "Rio de Janeiro", "Łódź", "oat milk"), as people type them.
$py $t/gen_data.py --split heldout --heldout-values tests/data/chat_heldout5_values.json --per-length 60 --seed 19 \
  --out tests/data/chat_heldout5.jsonl
data=(--split train --augment --grammar --positions --restate --wide-items --variety)
# The tokenizer first (from conversations without --vocab-pieces), then the training sets, whose
# made-up words are partly glued from its tokens, with phrasings written apart from the
# generator and the held-out pools (--paraphrases: tools/train/paraphrases/).
$py $t/gen_data.py "${data[@]}" --count 8000 --seed 3 --out "$work/bpe-corpus.jsonl"
$py $t/train_bpe.py --data "$work/bpe-corpus.jsonl" --conversations 8000 --vocab 1536 --out "$work/tokenizer.json"
# Phase 1's set has the phrasings of writers 1-3, phase 2's those of writers 1-6 and 10-12 (4-6
# came later, and only phase 2 was rerun with them; 10-12 wrote greetings and thanks only;
# tools/train/README.md).
data+=(--vocab-pieces "$work/tokenizer.json")
$py $t/gen_data.py "${data[@]}" --paraphrases 'writer[1-3].json' --count 70000 --seed 1 --out "$work/train.jsonl"
# Phase 2's set also: sums and questions composed from leads, expressions and tails
# (--arith-frames, --ask-frames), names, cities, pets and list items of several words or with
# accents, unknown words after a stated value, greetings in mid-conversation (--value-shapes).
$py $t/gen_data.py "${data[@]}" --paraphrases --distractors --arith-frames --ask-frames --value-shapes \
  --count 30000 --seed 2 \
  --out "$work/train-distractors.jsonl"
start=$(date +%s)
# Two warmup + cosine schedules, steps of 3584 tokens, forward passes in bf16. Both training
# sets are gen_data.py --augment: made-up words of random letters as names, cities, pets, list
# items and words to repeat (copying practice on every token the tokenizer has), more frames,
# noise around the messages; --grammar, --positions: composed stating frames, the value first
# or followed by other words; --restate: the reply to a stated fact repeats it; --wide-items:
# ~250 more real list items; --variety: stating frames around the words that mark each fact in
# ordinary speech (a species for a pet, who gave a name, a colour word alone). Phase 1 (from
# scratch) follows a 3600-step schedule and stops at step 2400; phase 2 continues on
# conversations with unknown words inserted into the messages (--distractors), so that
# questions phrased in words the model never saw still reach the fact they name.
arch=(--n-embd 320 --n-ff 896 --n-head 5 --n-head-kv 5 --n-layer 6 --attn-layers 1,3,5 --max-len 1024 --threads 2
      --tokenizer "$work/tokenizer.json" --save-every 100 --batch-tokens 3584 --bf16)
$py $t/train.py "${arch[@]}" --data "$work/train.jsonl" --lr 2e-3 --steps 3600 --stop-after 2400 --seed 1 \
  --out "$work/model-phase1.pt" | tee "$work/train-phase1.log"
$py $t/train.py "${arch[@]}" --data "$work/train-distractors.jsonl" --lr 1e-3 --steps 1300 --seed 3 \
  --init-from "$work/model-phase1.pt" --out "$work/model.pt" | tee "$work/train.log"
echo "training took $(( $(date +%s) - start )) s"
$py $t/export_gguf.py --checkpoint "$work/model.pt" --tokenizer "$work/tokenizer.json" \
  --out models/warmstart-chat.gguf --mkmodel ../shared/tools/mkmodel.py
$py $t/make_reference.py --checkpoint "$work/model.pt" --tokenizer "$work/tokenizer.json" \
  --out models/warmstart-chat.ref
ls -l models/
if [ -x build/warmstart ]; then $py $t/eval_skills.py; fi
