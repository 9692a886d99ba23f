#!/usr/bin/env python3
"""Trains the lfm2 chat model on generated conversations (CPU, --threads threads, fixed seed).

Conversations are rendered with ChatML, exactly as the model's chat template does:
  <|im_start|>{role}\\n{content}<|im_end|>\\n
and the loss is taken on assistant tokens only (the reply's content and its <|im_end|>).
"""
import argparse
import json
import math
import os
import random
import time

import torch
import torch.nn.functional as F

from bpe import Tokenizer
from model import LFM2, Config


def encode_conversation(tok, messages, max_len):
    """(ids, target mask) of one rendered conversation; mask marks tokens the model must predict."""
    im_start, im_end = tok.special_ids["<|im_start|>"], tok.special_ids["<|im_end|>"]
    ids, mask = [], []
    for m in messages:
        head = tok.encode(m["role"] + "\n")
        body = tok.encode(m["role"] + "\n" + m["content"])
        assert body[:len(head)] == head, "role header must tokenize on its own"
        learn = m["role"] == "assistant"
        ids += [im_start] + body + [im_end] + tok.encode("\n")
        mask += [0] * (1 + len(head)) + [int(learn)] * (len(body) - len(head) + 1) + [0]
    return ids[:max_len], mask[:max_len]


def batches(data, batch_tokens, rng):
    """Length-bucketed batches of roughly `batch_tokens` padded tokens, in random order."""
    order = sorted(range(len(data)), key=lambda i: (len(data[i][0]), rng.random()))
    out, cur = [], []
    for i in order:
        if cur and (len(cur) + 1) * len(data[i][0]) > batch_tokens:
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def collate(data, idx):
    T = max(len(data[i][0]) for i in idx)
    ids = torch.zeros(len(idx), T, dtype=torch.long)
    tgt = torch.full((len(idx), T), -100, dtype=torch.long)
    for r, i in enumerate(idx):
        x, m = data[i]
        ids[r, :len(x)] = torch.tensor(x)
        y = torch.tensor(x[1:] + [0])
        keep = torch.tensor(m[1:] + [0], dtype=torch.bool)
        tgt[r, :len(x)] = torch.where(keep, y, torch.full_like(y, -100))
    return ids, tgt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch-tokens", type=int, default=4096)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--n-embd", type=int, default=160)
    ap.add_argument("--n-ff", type=int, default=480)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-head-kv", type=int, default=2)
    ap.add_argument("--n-layer", type=int, default=6)
    ap.add_argument("--attn-layers", default="2,5")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bf16", action="store_true",
                    help="the forward pass under torch.autocast(bf16): the matmuls in bf16 (oneDNN; ~4x faster "
                         "than f32 on an AVX512_BF16 CPU), weights, optimizer and loss in f32")
    ap.add_argument("--save-every", type=int, default=500)
    ap.add_argument("--init-from", default="", help="start from this checkpoint's weights (a new schedule)")
    ap.add_argument("--stop-after", type=int, default=0, help="stop after this many steps of the --steps schedule")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    tok = Tokenizer.load(args.tokenizer)
    data = []
    with open(args.data) as f:
        for line in f:
            data.append(encode_conversation(tok, json.loads(line)["messages"], args.max_len))
    n_tok = sum(len(x) for x, _ in data)
    print(f"{len(data)} conversations, {n_tok} tokens, {sum(sum(m) for _, m in data)} target tokens", flush=True)

    cfg = Config(tok.n_vocab, n_embd=args.n_embd, n_ff=args.n_ff, n_head=args.n_head, n_head_kv=args.n_head_kv,
                 attn_layers=[int(a) for a in args.attn_layers.split(",")], n_layer=args.n_layer)
    model = LFM2(cfg)
    if args.init_from:
        model.load_state_dict(torch.load(args.init_from, map_location="cpu")["model"])
        print(f"weights from {args.init_from}", flush=True)
    print(f"{sum(p.numel() for p in model.parameters())} parameters", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and not n.endswith("conv")]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and not n.endswith("conv"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-8)
    warmup = max(1, args.steps // 30)

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        frac = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))

    def save(step, loss):
        tmp = args.out + ".tmp"
        torch.save({"config": cfg.to_dict(), "model": model.state_dict(), "step": step, "loss": loss,
                    "elapsed_s": time.time() - t0}, tmp)
        os.replace(tmp, args.out)

    t0 = time.time()
    queue, step, ema = [], 0, None
    model.train()
    last = min(args.steps, args.stop_after) if args.stop_after else args.steps
    while step < last:
        if not queue:
            queue = batches(data, args.batch_tokens, rng)
        ids, tgt = collate(data, queue.pop())
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        learn = tgt != -100  # (B, T): ~1/4 of the tokens; the LM head runs on those rows only
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            logits = model.head(model.hidden(ids)[learn])  # (n_learn, n_vocab)
        loss = F.cross_entropy(logits.float(), tgt[learn])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 25 == 0 or step == 1:
            print(f"step {step} loss {loss.item():.4f} ema {ema:.4f} lr {lr_at(step):.2e} "
                  f"{time.time() - t0:.0f}s", flush=True)
        if step % args.save_every == 0:
            save(step, ema)
    save(step, ema)
    print(f"done: {step} steps, final ema loss {ema:.4f}, {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
