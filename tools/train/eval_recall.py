#!/usr/bin/env python3
"""Recall accuracy of a GGUF chat model on generated held-out conversations, through
`warmstart chat` (stdin not a terminal: one user message per line in, one reply per line out).

The user messages of each conversation are piped in; the model's own replies become the
history (as in a real chat). A check passes when the reply to the checked user message
contains the expected fact. Prints per-kind and overall accuracy; --show prints failures.
"""
import argparse
import collections
import json
import subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmstart", default="build/warmstart")
    ap.add_argument("--model", default="models/warmstart-chat.gguf")
    ap.add_argument("--data", default="tests/data/chat_heldout.jsonl")
    ap.add_argument("--show", action="store_true")
    args = ap.parse_args()
    total = collections.Counter()
    good = collections.Counter()
    with open(args.data) as f:
        convs = [json.loads(line) for line in f if line.strip()]
    for conv in convs:
        users = [(i, m["content"]) for i, m in enumerate(conv["messages"]) if m["role"] == "user"]
        out = subprocess.run([args.warmstart, "chat", "-m", args.model, "-q", "-t", "1"],
                             input="".join(u.replace("\n", " ") + "\n" for _, u in users),
                             capture_output=True, text=True, check=True).stdout.split("\n")[:-1]
        assert len(out) == len(users), (len(out), len(users))
        reply_of = {i: r for (i, _), r in zip(users, out)}
        for c in conv["checks"]:
            ok = c["expect"] in reply_of[c["turn"]]
            total[c["kind"]] += 1
            good[c["kind"]] += ok
            if args.show and not ok:
                print(f"MISS [{c['kind']}] {conv['messages'][c['turn']]['content']!r} -> {reply_of[c['turn']]!r} "
                      f"(expected {c['expect']!r})")
    for k in sorted(total):
        print(f"{k:8s} {good[k]:3d}/{total[k]:3d}")
    n, g = sum(total.values()), sum(good.values())
    print(f"recall: {g}/{n} = {g / n:.3f}")


if __name__ == "__main__":
    main()
