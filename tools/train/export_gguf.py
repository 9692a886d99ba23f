#!/usr/bin/env python3
"""Writes the trained lfm2 chat model as a GGUF v3 file (F16 matrices, F32 norms and conv kernels).

The GGUF writer is the one of ../shared/tools/mkmodel.py, imported by path (not copied).
Metadata: the lfm2 keys warmstart and llama.cpp read, the byte-level BPE tokenizer
(pre "qwen2", control tokens with type 3, bos/eos/eot), and a ChatML chat template.
"""
import argparse
import importlib.util
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bpe import PRE_TOKENIZER, SPECIALS, Tokenizer  # noqa: E402


def load_mkmodel(path):
    spec = importlib.util.spec_from_file_location("mkmodel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CHAT_TEMPLATE = ("{% for message in messages %}"
                 "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
                 "{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=["f16", "f32"], default="f16")
    ap.add_argument("--mkmodel", default=os.path.join(HERE, "../../../shared/tools/mkmodel.py"))
    ap.add_argument("--description", default="")
    args = ap.parse_args()
    mk = load_mkmodel(args.mkmodel)

    ck = torch.load(args.checkpoint, map_location="cpu")
    c, sd = ck["config"], ck["model"]
    tok = Tokenizer.load(args.tokenizer)
    assert tok.n_vocab == c["n_vocab"]
    E, L, H, KV, F = c["n_embd"], c["n_layer"], c["n_head"], c["n_head_kv"], c["n_ff"]
    D = E // H
    big = mk.GGML_TYPE_F16 if args.dtype == "f16" else mk.GGML_TYPE_F32

    w = mk.GGUFWriter()
    a = "lfm2."
    w.str("general.architecture", "lfm2")
    w.str("general.type", "model")
    w.str("general.name", "warmstart-chat")
    w.str("general.description", args.description or
          "warmstart's small synthetic-chat model (tools/train/build_model.sh); step %d" % ck["step"])
    w.u32("general.file_type", mk.DTYPES[args.dtype][1])
    w.u32("general.quantization_version", 2)
    w.u32(a + "vocab_size", tok.n_vocab)
    w.u32(a + "context_length", c["context_length"])
    w.u32(a + "embedding_length", E)
    w.u32(a + "block_count", L)
    w.u32(a + "feed_forward_length", F)
    w.u32(a + "attention.head_count", H)
    w.arr(a + "attention.head_count_kv", mk.T_UINT32, [KV if i in c["attn_layers"] else 0 for i in range(L)])
    w.f32(a + "rope.freq_base", c["rope_base"])
    w.f32(a + "attention.layer_norm_rms_epsilon", c["eps"])
    w.u32(a + "shortconv.l_cache", 3)

    sp = tok.special_ids
    w.str("tokenizer.ggml.model", "gpt2")
    w.str("tokenizer.ggml.pre", PRE_TOKENIZER)
    w.arr("tokenizer.ggml.tokens", mk.T_STRING, tok.tokens)
    w.arr("tokenizer.ggml.token_type", mk.T_INT32,
          [mk.TOKEN_TYPE_CONTROL if t in SPECIALS else mk.TOKEN_TYPE_NORMAL for t in tok.tokens])
    w.arr("tokenizer.ggml.merges", mk.T_STRING, [l + " " + r for l, r in tok.merges])
    w.u32("tokenizer.ggml.bos_token_id", sp["<|endoftext|>"])
    w.u32("tokenizer.ggml.eos_token_id", sp["<|im_end|>"])
    w.u32("tokenizer.ggml.eot_token_id", sp["<|im_end|>"])
    w.u32("tokenizer.ggml.padding_token_id", sp["<|endoftext|>"])
    w.bool("tokenizer.ggml.add_bos_token", False)
    w.str("tokenizer.chat_template", CHAT_TEMPLATE)

    def t(name, key, ne, gtype):
        # torch stores a Linear weight as (out, in) = numpy order of ggml ne (in, out)
        arr = sd[key].float().numpy().astype(np.float32)
        w.tensor(name, ne, gtype, lambda arr=arr: arr)

    t("token_embd.weight", "token_embd.weight", (E, tok.n_vocab), big)
    t("token_embd_norm.weight", "token_embd_norm", (E,), mk.GGML_TYPE_F32)
    for i in range(L):
        p, q = "blk.%d." % i, "blocks.%d." % i
        t(p + "attn_norm.weight", q + "attn_norm", (E,), mk.GGML_TYPE_F32)
        if i in c["attn_layers"]:
            t(p + "attn_q.weight", q + "attn_q.weight", (E, H * D), big)
            t(p + "attn_k.weight", q + "attn_k.weight", (E, KV * D), big)
            t(p + "attn_v.weight", q + "attn_v.weight", (E, KV * D), big)
            t(p + "attn_q_norm.weight", q + "attn_q_norm", (D,), mk.GGML_TYPE_F32)
            t(p + "attn_k_norm.weight", q + "attn_k_norm", (D,), mk.GGML_TYPE_F32)
            t(p + "attn_output.weight", q + "attn_output.weight", (H * D, E), big)
        else:
            t(p + "shortconv.conv.weight", q + "conv", (3, E), mk.GGML_TYPE_F32)
            t(p + "shortconv.in_proj.weight", q + "in_proj.weight", (E, 3 * E), big)
            t(p + "shortconv.out_proj.weight", q + "out_proj.weight", (E, E), big)
        t(p + "ffn_norm.weight", q + "ffn_norm", (E,), mk.GGML_TYPE_F32)
        t(p + "ffn_gate.weight", q + "ffn_gate.weight", (E, F), big)
        t(p + "ffn_up.weight", q + "ffn_up.weight", (E, F), big)
        t(p + "ffn_down.weight", q + "ffn_down.weight", (F, E), big)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    w.write(args.out)
    print(f"wrote {args.out}: {os.path.getsize(args.out)} bytes")


if __name__ == "__main__":
    main()
