#!/usr/bin/env python3
"""Writes `warmstart replay` scripts with the shapes of ../shared/tools/turnbench.py's
scenarios: 12 turns, a system prompt of ~380 words (~640 tokens with the test vocabulary
that splits words finely), ~110-word (~150-token) user turns, 32 generated tokens.

  append      one conversation, each turn appends a user message
  edit        like append, but from turn 8 on the 2nd user message has been edited
  interleave  3 conversations sharing the system prompt, round-robin (36 requests)
  strip       like append, but past replies come back shortened ("reasoning stripped"),
              so history diverges at the previous reply
  agent       a tool loop: one task, then each turn appends the reply (the model's tool
              call, as generated) and a role "tool" message with the call's result

usage: make_replay_scripts.py OUTDIR [--turns 12] [--seed 1]
"""
import argparse, json, os, random

WORDS = ("time people way year day thing man world life hand part child eye woman place work week case "
         "point government company number group problem fact river stone light water garden market letter "
         "music paper window table morning evening question answer story history idea reason power city "
         "country family school student teacher friend doctor engine memory state model token cache turn "
         "prefix window layer kernel thread budget snapshot restore history reply system user summary").split()


def words(rng, n):
    out = []
    for i in range(n):
        w = rng.choice(WORDS)
        out.append(w.capitalize() if i % 12 == 0 else w)
        if i % 12 == 11:
            out[-1] += "."
    return " ".join(out)


def script(scenario, turns, seed, system_words=380, user_words=110, max_tokens=32, edit_at=8):
    rng = random.Random(seed)
    system = {"role": "system", "content": "You are a careful assistant. " + words(rng, system_words)}
    n_conv = 3 if scenario == "interleave" else 1
    convs = [[dict(system)] for _ in range(n_conv)]
    lines = []
    for t in range(1, turns + 1):
        for c, msgs in enumerate(convs):
            if scenario == "agent":
                if t == 1:
                    msgs.append({"role": "user", "content": "Task: " + words(rng, user_words)})
                lines.append({"messages": list(msgs), "max_tokens": max_tokens, "conversation": "c%d" % c})
                msgs.append({"role": "assistant", "from_turn": len(lines)})
                msgs.append({"role": "tool", "tool_call_id": "call%d" % t,
                             "content": json.dumps({"step": t, "result": words(rng, 40)})})
                continue
            if scenario == "edit" and t == edit_at and len(msgs) > 3:
                msgs[3] = {"role": "user", "content": "Edited: " + words(rng, user_words)}
            msgs.append({"role": "user", "content": words(rng, user_words)})
            lines.append({"messages": list(msgs), "max_tokens": max_tokens, "conversation": "c%d" % c})
            line_no = len(lines)
            if scenario == "strip":
                msgs.append({"role": "assistant", "content": "(reply %d, reasoning removed)" % line_no})
            else:
                msgs.append({"role": "assistant", "from_turn": line_no})
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    for sc in ("append", "edit", "interleave", "strip", "agent"):
        path = os.path.join(a.outdir, sc + ".jsonl")
        with open(path, "w") as f:
            for line in script(sc, a.turns, a.seed):
                f.write(json.dumps(line) + "\n")
        print(path)


if __name__ == "__main__":
    main()
