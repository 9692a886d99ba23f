#!/usr/bin/env bash
# Models the goldens do not cover: other seeds, shapes, expert counts and top-k, written
# by ../shared/tools/mkmodel.py into a temporary folder, evaluated with `warmstart logits`
# and checked against ../shared/tools/np_reference.py (an independent float64 forward
# pass) on the stored full logit rows.
#   usage: numpy_variants.sh WARMSTART_BINARY SHARED_DIR
set -euo pipefail
ws="$1"
shared="$2"
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ids=$($py -c "import random; r=random.Random(11); print(','.join(str(r.randrange(8000)) for _ in range(90)))")

fail=0
# name | mkmodel arguments | np_reference arguments | max |Δ logit| allowed
while IFS='|' read -r name args ref_args bound; do
  [ -z "$name" ] && continue
  model="$tmp/$name.gguf"
  # shellcheck disable=SC2086
  $py "$shared/tools/mkmodel.py" $args --out "$model" > "$tmp/mkmodel.log" 2>&1 || { cat "$tmp/mkmodel.log"; exit 1; }
  "$ws" logits -m "$model" --tokens "$ids" --ubatch 7 -t 2 --out "$tmp/$name" > /dev/null 2>&1
  # shellcheck disable=SC2086
  line=$($py "$shared/tools/np_reference.py" $ref_args "$model" "$tmp/$name.json" | grep "stored rows")
  got=$(sed -E 's/.*stored rows max\|d\| ([^ ]+).*/\1/' <<< "$line")
  if $py -c "import sys; sys.exit(0 if float('$got') <= float('$bound') else 1)"; then
    echo "ok    $name: max |d| $got <= $bound"
  else
    echo "FAIL  $name: max |d| $got > $bound   ($line)"
    fail=1
  fi
done <<'EOF'
llama-seed7|--arch llama --preset tiny --seed 7||1e-3
llama-narrow|--arch llama --preset tiny --seed 3 --set n_embd=48 --set n_head=6 --set n_head_kv=3 --set head_dim=8 --set n_ff=80||1e-3
llama-rope3-seed5|--arch llama --preset tiny-rope3 --seed 5||1e-3
llama-yarn-seed5|--arch llama --preset tiny-yarn --seed 5||1e-3
qwen2-seed7|--arch qwen2 --preset tiny --seed 7 --set n_layer=3||1e-3
qwen3-seed7|--arch qwen3 --preset tiny --seed 7||1e-3
gemma3-seed7|--arch gemma3 --preset tiny --seed 7|--gelu fp16table|5e-3
gemma4-seed7|--arch gemma4 --preset tiny --seed 7|--gelu fp16table|5e-3
gemma4-31b-layout|--arch gemma4 --preset tiny --seed 5 --set n_embd_per_layer=0 --set kv_shared=0 --set double_wide_mlp=false|--gelu fp16table|5e-3
gpt-oss-6x3|--arch gpt-oss --preset tiny --seed 17 --set n_expert=6 --set n_expert_used=3||1e-3
gpt-oss-5x1|--arch gpt-oss --preset tiny --seed 11 --set n_expert=5 --set n_expert_used=1 --set n_layer=3||1e-3
lfm2-seed7|--arch lfm2 --preset tiny --seed 7||1e-3
mamba-seed7|--arch mamba --preset tiny --seed 7||1e-3
mamba2-seed7|--arch mamba2 --preset tiny --seed 7||1e-3
granitehybrid-seed7|--arch granitehybrid --preset tiny --seed 7||1e-3
nemotron_h-seed7|--arch nemotron_h --preset tiny --seed 7||1e-3
qwen35-seed7|--arch qwen35 --preset tiny --seed 7||1e-3
EOF
exit $fail
