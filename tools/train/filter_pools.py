#!/usr/bin/env python3
"""Drops from a held-out pool file (load_heldout_pools' layout) every phrasing near() one that
phase 2's training pools hold (build_model.sh's options, every paraphrase writer): how set 4
was made (tools/train/README.md). A pool file written after a model was trained cannot
change that model's data, so its own entries must go instead of the trained ones; afterwards
gen_data.py writes every training set as before (check with cmp). Names, cities, pets, items
and countries are left to gen_data.py --heldout-pools, which drops those a training pool holds.

  filter_pools.py --pools NEW_pools.json --out F.json
"""
import argparse
import json
import pathlib

import gen_data as g


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pools", required=True, help="the new held-out pool file")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    new = pathlib.Path(args.pools).resolve()
    # The training pools as they were before the new file existed.
    repo = pathlib.Path(g.__file__).resolve().parents[2]
    others = [f for f in sorted(repo.glob("tests/data/chat_heldout*_pools.json")) if f.resolve() != new]
    g.heldout_pool_docs = lambda: tuple(json.loads(f.read_text()) for f in others)
    g.extend_training_pools({"grammar", "positions", "wide_items", "distractors", "variety", "arith_frames",
                             "ask_frames"}, "*.json")
    with open(new) as f:
        d = json.load(f)
    pools = [(g.FACTS[k][p]["train"], d["facts"][k], p) for k in g.FACTS for p in ("state", "np", "wh", "ask")]
    pools += [(pool["train"], d, key) for pool, key in g.PHRASE_POOLS + ((g.ECHO, "echo"),)]
    dropped = 0
    for train, node, key in pools:
        trained = [(t, g.word_set(t)) for t in train]
        keep = []
        for h in node[key]:
            hit = next((t for t, words in trained if g.near(words, g.word_set(h))), None)
            if hit is None:
                keep.append(h)
            else:
                dropped += 1
                print(f"{key}: {h!r} is near the trained {hit!r}")
        node[key] = keep
    with open(args.out, "w") as f:
        json.dump(d, f, indent=1)
        f.write("\n")
    print(f"{dropped} dropped; left: " + ", ".join(f"{k} {len(v)}" for k, v in d.items() if k != "facts"))


if __name__ == "__main__":
    main()
