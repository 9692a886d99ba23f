#!/usr/bin/env python3
"""Reference outputs of the exported model, for warmstart's tests (no torch needed at test time).

Writes <out>.json and <out>.f32:
* "tokenizer": held-out texts (phrasings the training data never used, digits, punctuation,
  unicode, control tokens) with the ids this script's tokenizer gives; warmstart's tokenizer
  must give the same ids.
* "logits": a few token sequences; for each, logits rows at some positions, computed by the
  PyTorch model with the weights exactly as stored in the GGUF (F16 matrices) and, as
  warmstart and llama.cpp do for F16 weights, the inputs of those matrix products rounded
  to F16. The rows are stored as little-endian float32 in <out>.f32, one after another.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bpe import Tokenizer  # noqa: E402
from model import LFM2, Config  # noqa: E402

TOKENIZER_TEXTS = [
    "<|im_start|>user\nPeople know me by the name Zoe.<|im_end|>\n<|im_start|>assistant\n",
    "Could you repeat the name I told you? Much appreciated.",
    "How much is 36 plus 7? And 1234567890 / 42 = 29394.47...",
    "  leading spaces,\ttabs\n\nand blank lines\r\n  trailing   ",
    "Don't, can't, I'LL, we've, it's, THEY'RE, you'd, I'm!",
    "Unicode: café naïve Zürich — 東京 😀 ñ",
    "Hmm, if I could only eat one food, it would be ramen.<|im_end|><|endoftext|>",
    "CAPITALS AND lower case, mixed: HeLLo WoRLD; punctuation?!...",
]

LOGIT_TEXTS = [
    "<|im_start|>user\nMy name is Anna.<|im_end|>\n<|im_start|>assistant\nNice to meet you, Anna.<|im_end|>\n"
    "<|im_start|>user\nWhat is 7 + 5?<|im_end|>\n<|im_start|>assistant\n12<|im_end|>\n"
    "<|im_start|>user\nWhat is my name?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nThe city I call home is Lisbon. Remember the number 4821.<|im_end|>\n<|im_start|>assistant\n",
    "Unicode: café 東京 😀 and some digits 0123456789",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True, help="path without extension")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tok = Tokenizer.load(args.tokenizer)
    ck = torch.load(args.checkpoint, map_location="cpu")
    c = ck["config"]
    cfg = Config(c["n_vocab"], n_embd=c["n_embd"], n_ff=c["n_ff"], n_head=c["n_head"], n_head_kv=c["n_head_kv"],
                 attn_layers=c["attn_layers"], n_layer=c["n_layer"], eps=c["eps"], rope_base=c["rope_base"],
                 context_length=c["context_length"])
    model = LFM2(cfg)
    model.load_state_dict(ck["model"])
    model.eval()
    # The GGUF stores every 2-D matrix except the conv kernels as F16: use those values.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and not name.endswith("conv"):
                p.copy_(p.half().float())
    # F16 weights take F16 activations (warmstart's and llama.cpp's vec_dot_type).
    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear):
            mod.register_forward_pre_hook(lambda m, inp: (inp[0].half().float(),))
    model.round_head_input = True

    ref = {"tokenizer": [], "logits": [], "n_vocab": tok.n_vocab}
    for t in TOKENIZER_TEXTS:
        ids = tok.encode(t)
        assert tok.decode(ids) == t, "round trip"
        ref["tokenizer"].append({"text": t, "ids": ids})
    rows = []
    with torch.no_grad():
        for t in LOGIT_TEXTS:
            ids = tok.encode(t)
            logits = model(torch.tensor([ids]))[0].double().numpy()
            positions = sorted(set(list(range(0, len(ids), 7)) + [len(ids) - 1]))
            ref["logits"].append({"text": t, "ids": ids, "positions": positions, "row_offset": len(rows)})
            rows.extend(logits[p] for p in positions)
    np.asarray(rows, dtype="<f4").tofile(args.out + ".f32")
    with open(args.out + ".json", "w") as f:
        json.dump(ref, f, indent=1, ensure_ascii=False)
    print(f"wrote {args.out}.json and {args.out}.f32 ({len(rows)} rows)")


if __name__ == "__main__":
    main()
