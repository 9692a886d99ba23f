#!/usr/bin/env python3
"""Skill accuracy of a GGUF chat model on held-out conversations (tools/train/gen_data.py
--split heldout), through `warmstart chat` (stdin not a terminal: one user message per line
in, one reply per line out).

The user messages of each conversation are piped in and the model's own replies become the
history, as in a real chat. A check passes when the reply to its user message contains
every string of its `expect`. Prints accuracy per skill and per conversation length; every
conversation runs twice, with the prefix cache on and off, and the replies must be identical.
Each missed recall is also traced to where it went wrong: the reply to the message that stated
the fact (which repeats it) already had it wrong, or it was right then and lost later.
--show prints the failures.
"""
import argparse
import collections
import json
import re
import subprocess
import sys


def replies(args, users, cache_mb):
    """The model's replies, one per user message; bytes that are not UTF-8 (a model can end a
    reply inside a character) become U+FFFD, so such a reply is wrong, not a crash."""
    out = subprocess.run([args.warmstart, "chat", "-m", args.model, "-q", "-t", str(args.threads),
                          "--cache-budget-mb", str(cache_mb)],
                         input="".join(u.replace("\n", " ") + "\n" for u in users),
                         capture_output=True, text=True, errors="replace", check=True).stdout.split("\n")[:-1]
    assert len(out) == len(users), (len(out), len(users))
    return out


def acknowledged(msgs, user_idx, reply_of, check):
    """Whether the reply to the user message that stated the checked value (the last one before
    the question holding its first word, case-insensitive) repeats it; None if no message does."""
    value = check["expect"][0].strip().rstrip(".").lower()
    first = re.compile(rf"\b{re.escape(re.split(r',| and ', value)[0])}\b")
    stated = [i for i in user_idx if i < check["turn"] and first.search(msgs[i]["content"].lower())]
    return value in reply_of[stated[-1]].lower() if stated else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warmstart", default="build/warmstart")
    ap.add_argument("--model", default="models/warmstart-chat.gguf")
    ap.add_argument("--data", default="tests/data/chat_heldout.jsonl")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--show", action="store_true")
    args = ap.parse_args()
    total, good = collections.Counter(), collections.Counter()  # keys: (skill, turns)
    fact_total, fact_good = collections.Counter(), collections.Counter()  # recall checks, keys: fact
    differ = 0
    misses = collections.Counter()  # missed recalls by acknowledged(): True, False, None
    with open(args.data) as f:
        convs = [json.loads(line) for line in f if line.strip()]
    for conv in convs:
        msgs = conv["messages"]
        user_idx = [i for i, m in enumerate(msgs) if m["role"] == "user"]
        users = [msgs[i]["content"] for i in user_idx]
        on, off = replies(args, users, 256), replies(args, users, 0)
        differ += on != off
        reply_of = dict(zip(user_idx, on))
        for c in conv["checks"]:
            reply = reply_of[c["turn"]]
            ok = all(e in reply for e in c["expect"])
            key = (c["kind"], conv["turns"])
            total[key] += 1
            good[key] += ok
            if c["kind"] == "recall":
                fact_total[c["fact"]] += 1
                fact_good[c["fact"]] += ok
                if not ok:
                    misses[acknowledged(msgs, user_idx, reply_of, c)] += 1
            if args.show and not ok:
                print(f"MISS [{c['kind']}, {conv['turns']} turns] {msgs[c['turn']]['content']!r} -> {reply!r} "
                      f"(expected {c['expect']})")
    lengths = sorted({n for _, n in total})
    print(f"{'skill':12s}" + "".join(f"{str(n) + ' turns':>16s}" for n in lengths) + f"{'all':>16s}")
    for skill in sorted({k for k, _ in total}) + ["all"]:
        row = f"{skill:12s}"
        for n in lengths + [None]:
            keys = [k for k in total if (skill == "all" or k[0] == skill) and (n is None or k[1] == n)]
            t, g = sum(total[k] for k in keys), sum(good[k] for k in keys)
            row += f"{f'{g}/{t} {100 * g / t:.1f}%' if t else '-':>16s}"
        print(row)
    print("recall per fact: " + ", ".join(f"{k} {fact_good[k]}/{fact_total[k]}" for k in sorted(fact_total)))
    print(f"missed recalls: {sum(misses.values())}, of them acknowledged wrongly when stated {misses[False]}, "
          f"acknowledged right and lost later {misses[True]}, statement not found {misses[None]}")
    print(f"conversations whose replies differ with the cache on and off: {differ}/{len(convs)}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
