#!/usr/bin/env python3
"""One summary line for `warmstart replay --json` runs of one scenario: sum of TTFT,
reuse, peak RSS, checkpoints (their snapshot time inside the TTFT and, for the
frontier, after the first token) and the warm turns' TTFT / ideal ratio. Given several runs
of the same script (REPS), each turn's TTFT and ideal (and the snapshot times) are reduced over the runs,
both with the same statistic, before their ratio is taken: a noisy host moves single
turns by +-20%. STAT=median (default) or STAT=min; the minimum suits a shared VM, whose
noise (steal, neighbours) only ever adds time to the same work.

usage: [STAT=median|min] summarize_replay.py ARCH SCENARIO CACHE RUN.jsonl [RUN.jsonl ...]"""
import json, os, statistics, sys

arch, scenario, cache, paths = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
stat_name = os.environ.get("STAT", "median")
stat = {"median": statistics.median, "min": min}.get(stat_name)
if stat is None:
    sys.exit(f"STAT must be median or min, not {stat_name!r}")
runs = [[json.loads(l) for l in open(p) if l.strip()] for p in paths]
reduce = lambda key, i: stat([run[i][key] for run in runs])
rows = runs[0]
n = min(len(r) for r in runs)
ttft = [reduce("ttft_ms", i) for i in range(n)]
warm = [i for i in range(n) if rows[i]["turn"] > (3 if scenario == "interleave" else 1)]
ratios = [ttft[i] / reduce("ideal_ms", i) for i in warm if "ideal_ms" in rows[i]]
ckpt = sum(r.get("checkpoints", 0) for r in rows)
ckpt_ms = stat([sum(r.get("checkpoint_ms", 0) for r in run) for run in runs])
frontier_ms = stat([sum(r.get("frontier_ms", 0) for r in run) for run in runs])
print(f"{arch:14s} {scenario:10s} cache {cache:3s}  sum TTFT {sum(ttft) / 1000:7.2f} s"
      f"  last turn {ttft[-1]:8.1f} ms  reused {sum(r['reused_tokens'] for r in rows):6d}"
      f" / prompt {sum(r['prompt_tokens'] for r in rows):6d}  peak RSS {max(r['rss_mb'] for r in rows):6.0f} MiB"
      f"  checkpoints {ckpt} ({ckpt_ms / 1000:.2f} s in TTFT, {frontier_ms / 1000:.2f} s after it)"
      + (f"  warm TTFT/ideal median {statistics.median(ratios):.2f} max {max(ratios):.2f}" if ratios else "")
      + (f"  ({stat_name}s of {len(runs)} runs)" if len(runs) > 1 else ""))
print("   per turn ttft_ms: " + " ".join(f"{t:.0f}" for t in ttft))
if ratios:
    print("   per warm turn ttft/ideal: " + " ".join(f"{x:.2f}" for x in ratios))
