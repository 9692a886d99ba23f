#!/usr/bin/env python3
"""The lfm2 architecture in PyTorch, exactly as warmstart (and llama.cpp) compute it.

Per layer:  x += op(RMSNorm(x, attn_norm));  x += SwiGLU(RMSNorm(x, ffn_norm))
  op = gated short convolution (L = 3) on conv layers:
       [b, c, h] = split(in_proj(u), 3);  y_t = sum_k w[:, k] * (b*h)_{t-2+k};  out_proj(c * y)
  op = GQA attention on attention layers, with per-head RMSNorm of Q and K, NEOX RoPE
       (rotates (x[i], x[i + d/2])), scale 1/sqrt(head_dim), output projection.
Output: RMSNorm(x, token_embd_norm) then the tied embedding matrix as LM head.
Parameter names are the GGUF tensor names with "." replaced by "_" inside a block.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class Config:
    def __init__(self, n_vocab, n_embd=160, n_ff=480, n_head=4, n_head_kv=2, attn_layers=(2, 5), n_layer=6,
                 eps=1e-5, rope_base=1e6, context_length=2048):
        self.n_vocab, self.n_embd, self.n_ff = n_vocab, n_embd, n_ff
        self.n_head, self.n_head_kv = n_head, n_head_kv
        self.attn_layers, self.n_layer = tuple(attn_layers), n_layer
        self.eps, self.rope_base, self.context_length = eps, rope_base, context_length

    @property
    def head_dim(self):
        return self.n_embd // self.n_head

    def to_dict(self):
        return dict(self.__dict__)


def causal_attention(q, k, v, chunk=256):
    """softmax(q k^T + causal mask) v for q, k, v (B, H, T, D), q already scaled; (B, H, T, D).
    Queries go in blocks of `chunk`: block [s, e) scores only keys [0, e), since every later key
    is masked for it anyway (same result, ~2/3 of the T x T work on a training batch)."""
    T, out = q.shape[2], []
    for s in range(0, T, chunk):
        e = min(T, s + chunk)
        scores = q[:, :, s:e] @ k[:, :, :e].transpose(-1, -2)  # (B, H, e - s, e)
        future = torch.ones(e - s, e, dtype=torch.bool).triu(s + 1)  # key j > query s + i
        out.append(torch.softmax(scores.masked_fill_(future, float("-inf")), dim=-1) @ v[:, :, :e])
    return torch.cat(out, dim=2)


class Block(nn.Module):
    def __init__(self, cfg, attention):
        super().__init__()
        d, self.cfg, self.attention = cfg.n_embd, cfg, attention
        self.attn_norm = nn.Parameter(torch.ones(d))
        self.ffn_norm = nn.Parameter(torch.ones(d))
        if attention:
            hd = cfg.head_dim
            self.attn_q = nn.Linear(d, cfg.n_head * hd, bias=False)
            self.attn_k = nn.Linear(d, cfg.n_head_kv * hd, bias=False)
            self.attn_v = nn.Linear(d, cfg.n_head_kv * hd, bias=False)
            self.attn_q_norm = nn.Parameter(torch.ones(hd))
            self.attn_k_norm = nn.Parameter(torch.ones(hd))
            self.attn_output = nn.Linear(cfg.n_head * hd, d, bias=False)
        else:
            self.in_proj = nn.Linear(d, 3 * d, bias=False)
            self.conv = nn.Parameter(torch.randn(d, 3) * 0.3)  # GGUF {3, d}: row c = channel c's kernel
            self.out_proj = nn.Linear(d, d, bias=False)
        self.ffn_gate = nn.Linear(d, cfg.n_ff, bias=False)
        self.ffn_up = nn.Linear(d, cfg.n_ff, bias=False)
        self.ffn_down = nn.Linear(cfg.n_ff, d, bias=False)

    def short_conv(self, u):
        d = self.cfg.n_embd
        bcx = self.in_proj(u)
        b, c, h = bcx.split(d, dim=-1)  # (B, T, d) each; split's backward is a cat, slicing's a zero fill
        bx = (b * h).transpose(1, 2)                     # (B, d, T)
        y = F.conv1d(F.pad(bx, (2, 0)), self.conv.unsqueeze(1), groups=d)  # y_t = sum_k w[k] bx_{t-2+k}
        return self.out_proj(c * y.transpose(1, 2))

    def attn(self, u, cos, sin):
        B, T, _ = u.shape
        H, KV, D = self.cfg.n_head, self.cfg.n_head_kv, self.cfg.head_dim
        q = rms_norm(self.attn_q(u).view(B, T, H, D), self.attn_q_norm, self.cfg.eps)
        k = rms_norm(self.attn_k(u).view(B, T, KV, D), self.attn_k_norm, self.cfg.eps)
        v = self.attn_v(u).view(B, T, KV, D)

        def rope(x):  # NEOX: rotate (x[i], x[i + D/2])
            x0, x1 = x.chunk(2, dim=-1)
            return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1)

        # (B, H, T, D); the scale goes on q (T x D), not on the T x T scores
        q = rope(q).transpose(1, 2) * (1.0 / math.sqrt(D))
        k, v = rope(k).transpose(1, 2), v.transpose(1, 2)
        if H != KV:
            k = k.repeat_interleave(H // KV, dim=1)  # q head h uses kv head h // (H/KV)
            v = v.repeat_interleave(H // KV, dim=1)
        o = causal_attention(q, k, v)
        return self.attn_output(o.transpose(1, 2).reshape(B, T, H * D))

    def forward(self, x, cos, sin):
        u = rms_norm(x, self.attn_norm, self.cfg.eps)
        x = x + (self.attn(u, cos, sin) if self.attention else self.short_conv(u))
        f = rms_norm(x, self.ffn_norm, self.cfg.eps)
        return x + self.ffn_down(F.silu(self.ffn_gate(f)) * self.ffn_up(f))


class LFM2(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.token_embd = nn.Embedding(cfg.n_vocab, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg, i in cfg.attn_layers) for i in range(cfg.n_layer)])
        self.token_embd_norm = nn.Parameter(torch.ones(cfg.n_embd))
        self.round_head_input = False  # round the LM head's input to F16 (as warmstart does for F16 weights)
        self.reset_parameters()

    def reset_parameters(self):
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 2 and not name.endswith("conv"):
                nn.init.normal_(p, std=std)
                if name.endswith(("out_proj.weight", "attn_output.weight", "ffn_down.weight")):
                    p.data *= 1 / math.sqrt(2 * self.cfg.n_layer)

    def rope_tables(self, T, device=None):
        D = self.cfg.head_dim
        i = torch.arange(D // 2, dtype=torch.float64)
        theta = torch.arange(T, dtype=torch.float64)[:, None] * self.cfg.rope_base ** (-2.0 * i / D)
        # shape (T, 1, D/2) to broadcast over (B, T, H, D/2)
        return theta.cos().float()[:, None, :], theta.sin().float()[:, None, :]

    def hidden(self, ids):
        """ids (B, T) -> the LM head's input (B, T, n_embd)."""
        cos, sin = self.rope_tables(ids.shape[1])
        x = self.token_embd(ids)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return rms_norm(x, self.token_embd_norm, self.cfg.eps)

    def head(self, x):
        """(..., n_embd) -> logits (..., n_vocab), the tied embedding matrix."""
        if self.round_head_input:
            x = x.half().float()
        return x @ self.token_embd.weight.T

    def forward(self, ids):
        return self.head(self.hidden(ids))
