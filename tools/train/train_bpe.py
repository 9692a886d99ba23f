#!/usr/bin/env python3
"""Learns the BPE merges from the first N generated conversations (rendered as ChatML)."""
import argparse
import json

import bpe


def render(messages):
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--conversations", type=int, default=8000)
    ap.add_argument("--vocab", type=int, default=1536, help="total size including the 3 control tokens")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    texts = []
    with open(args.data) as f:
        for i, line in enumerate(f):
            if i >= args.conversations:
                break
            texts.append(render(json.loads(line)["messages"]))
    merges = bpe.train(texts, args.vocab - 256 - len(bpe.SPECIALS))
    tok = bpe.Tokenizer(merges)
    tok.save(args.out)
    n = sum(len(tok.encode(t)) for t in texts)
    print(f"{len(merges)} merges, vocab {tok.n_vocab}; {n / len(texts):.1f} tokens per conversation")


if __name__ == "__main__":
    main()
