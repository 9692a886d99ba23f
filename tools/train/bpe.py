#!/usr/bin/env python3
"""Byte-level BPE (GPT-2 style) trainer and tokenizer, matching warmstart's "qwen2" pre-tokenizer.

* Text is first cut at the ChatML control tokens (they are single tokens, never merged).
* Every other fragment is split by the pre-tokenizer regex that warmstart (and llama.cpp)
  use for `tokenizer.ggml.pre = "qwen2"` (src/tokenizer/pretokenizer.cpp, k_re_qwen2): single
  digits, case-insensitive contractions; Python's `regex` module understands the same
  \\p{L} / \\p{N} classes as PCRE2.
* Each piece is mapped byte by byte to GPT-2's printable `bytes_to_unicode` alphabet, and
  merges are applied lowest rank first (leftmost on ties), as warmstart's encode_word does.

Vocabulary layout: ids 0..255 = the 256 byte symbols (in byte order), id 256+i = merge i,
then the control tokens <|endoftext|>, <|im_start|>, <|im_end|>.
"""
import heapq
import json
from collections import Counter

import regex

# k_re_qwen2 in src/tokenizer/pretokenizer.cpp, character for character.
PRE_TOKENIZER = "qwen2"
PRE_RE = regex.compile(
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SPECIAL_RE = regex.compile("(" + "|".join(regex.escape(s) for s in SPECIALS) + ")")


def bytes_to_unicode():
    """GPT-2's reversible map from the 256 byte values to printable unicode characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_ENC = bytes_to_unicode()
BYTE_DEC = {v: k for k, v in BYTE_ENC.items()}


def pre_tokenize(text):
    """Pieces of a text fragment without control tokens, in the byte alphabet."""
    return ["".join(BYTE_ENC[b] for b in m.encode("utf-8")) for m in PRE_RE.findall(text)]


def train(texts, n_merges):
    """Learns `n_merges` merges from an iterable of texts; returns the list of (left, right)."""
    words = Counter()
    for t in texts:
        for frag in SPECIAL_RE.split(t):
            if frag and frag not in SPECIALS:
                words.update(pre_tokenize(frag))
    # Each unique word as a list of symbols, with its frequency.
    seqs = [[list(w), c] for w, c in words.items()]
    pair_counts = Counter()
    where = {}  # pair -> set of word indices containing it
    for i, (s, c) in enumerate(seqs):
        for a, b in zip(s, s[1:]):
            pair_counts[(a, b)] += c
            where.setdefault((a, b), set()).add(i)
    merges = []
    for _ in range(n_merges):
        if not pair_counts:
            break
        # Most frequent pair; ties broken by the pair itself so that training is deterministic.
        best = max(pair_counts.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pair_counts[best] <= 0:
            break
        merges.append(best)
        a, b = best
        for i in sorted(where.get(best, ())):
            s, c = seqs[i]
            # remove this word's pair counts, merge, add them back
            for p in zip(s, s[1:]):
                pair_counts[p] -= c
            out, j = [], 0
            while j < len(s):
                if j + 1 < len(s) and s[j] == a and s[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            seqs[i][0] = out
            for p in zip(out, out[1:]):
                pair_counts[p] += c
                where.setdefault(p, set()).add(i)
        for p in [p for p, c in pair_counts.items() if c <= 0]:
            del pair_counts[p]
    return merges


class Tokenizer:
    def __init__(self, merges):
        self.merges = [tuple(m) for m in merges]
        self.tokens = [BYTE_ENC[b] for b in range(256)] + [a + b for a, b in self.merges] + SPECIALS
        self.ranks = {m: i for i, m in enumerate(self.merges)}
        self.ids = {}
        for i, t in enumerate(self.tokens):
            self.ids.setdefault(t, i)
        self.special_ids = {s: self.tokens.index(s) for s in SPECIALS}
        self.cache = {}

    @property
    def n_vocab(self):
        return len(self.tokens)

    def save(self, path):
        with open(path, "w") as f:
            json.dump({"pre": PRE_TOKENIZER, "merges": [list(m) for m in self.merges]}, f)

    @staticmethod
    def load(path):
        with open(path) as f:
            return Tokenizer(json.load(f)["merges"])

    def encode_word(self, word):
        """BPE of one pre-token, lowest-rank pair first, leftmost on ties (as warmstart)."""
        if word in self.cache:
            return self.cache[word]
        syms = list(word)  # symbols; "" once merged into the left neighbour
        nxt = list(range(1, len(syms))) + [-1]
        prv = list(range(-1, len(syms) - 1))
        heap = []

        def push(l, r):
            if l >= 0 and r >= 0:
                rk = self.ranks.get((syms[l], syms[r]))
                if rk is not None:
                    heapq.heappush(heap, (rk, l, r, len(syms[l]), len(syms[r])))

        for i in range(1, len(syms)):
            push(i - 1, i)
        while heap:
            rk, l, r, ll, rl = heapq.heappop(heap)
            if not syms[l] or not syms[r] or len(syms[l]) != ll or len(syms[r]) != rl or nxt[l] != r:
                continue
            syms[l] = syms[l] + syms[r]
            syms[r] = ""
            nxt[l] = nxt[r]
            if nxt[r] >= 0:
                prv[nxt[r]] = l
            push(prv[l], l)
            push(l, nxt[l])
        out = [self.ids[s] for s in syms if s]
        self.cache[word] = out
        return out

    def encode(self, text):
        """Token ids of `text`, control tokens parsed (add_bos is false: nothing prepended)."""
        out = []
        for frag in SPECIAL_RE.split(text):
            if not frag:
                continue
            if frag in self.special_ids:
                out.append(self.special_ids[frag])
            else:
                for w in pre_tokenize(frag):
                    out.extend(self.encode_word(w))
        return out

    def decode(self, ids):
        data = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t in SPECIALS:
                data += t.encode()
            else:
                data += bytes(BYTE_DEC[ch] for ch in t)
        return data.decode("utf-8", errors="replace")
