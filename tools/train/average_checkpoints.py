#!/usr/bin/env python3
"""Averages the weights of several train.py checkpoints of one architecture.

Phase-2 runs that start from the same phase-1 weights and differ only in their batch order
(--seed) end in nearby points of the loss surface; their mean ("model soup") is one model
whose held-out scores vary less with the draw than any single run's (tools/train/README.md).

    average_checkpoints.py --out build-train/model.pt build-train/model-s2.pt build-train/model-s3.pt
"""
import argparse

import torch


def average(paths):
    checkpoints = [torch.load(p, map_location="cpu") for p in paths]
    config = checkpoints[0]["config"]
    for path, c in zip(paths, checkpoints):
        if c["config"] != config:
            raise SystemExit(f"{path}: another architecture than {paths[0]} ({c['config']} vs {config})")
    mean = {}
    for name, first in checkpoints[0]["model"].items():
        # Accumulated in float64 so the order of the checkpoints does not change the result.
        total = sum(c["model"][name].double() for c in checkpoints)
        mean[name] = (total / len(checkpoints)).to(first.dtype)
    return {"config": config, "model": mean, "step": checkpoints[0]["step"],
            "loss": sum(c["loss"] for c in checkpoints) / len(checkpoints), "averaged_from": list(paths)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoints", nargs="+", help="train.py checkpoints (.pt) of one architecture")
    ap.add_argument("--out", required=True, help="the averaged checkpoint (.pt)")
    args = ap.parse_args()
    if len(args.checkpoints) < 2:
        raise SystemExit("give at least two checkpoints to average")
    torch.save(average(args.checkpoints), args.out)
    print(f"{args.out}: mean of {len(args.checkpoints)} checkpoints")


if __name__ == "__main__":
    main()
