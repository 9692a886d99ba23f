#!/usr/bin/env python3
"""One summary line for a `warmstart replay --json` run: sum of TTFT, warm-turn mean TTFT,
reuse, peak RSS and the warm turns' TTFT / ideal ratio (median and max)."""
import json, statistics, sys

arch, scenario, cache, path = sys.argv[1:5]
rows = [json.loads(l) for l in open(path) if l.strip()]
warm = [r for r in rows if r["turn"] > (3 if scenario == "interleave" else 1)]
ratios = [r["ttft_ratio"] for r in warm if "ttft_ratio" in r]
print(f"{arch:14s} {scenario:10s} cache {cache:3s}  sum TTFT {sum(r['ttft_ms'] for r in rows) / 1000:7.2f} s"
      f"  last turn {rows[-1]['ttft_ms']:8.1f} ms  reused {sum(r['reused_tokens'] for r in rows):6d}"
      f" / prompt {sum(r['prompt_tokens'] for r in rows):6d}  peak RSS {max(r['rss_mb'] for r in rows):6.0f} MiB"
      + (f"  warm TTFT/ideal median {statistics.median(ratios):.2f} max {max(ratios):.2f}" if ratios else ""))
print("   per turn ttft_ms: " + " ".join(f"{r['ttft_ms']:.0f}" for r in rows))
