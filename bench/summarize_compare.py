#!/usr/bin/env python3
"""Ratio table (warmstart / peer throughput) from bench/compare.sh's JSON lines.

Each (engine, arch, type, test) may have several rounds; the table uses the median of the
per-round means, and shows the spread (min..max of the round means) because the machine
the numbers come from may be shared and noisy."""
import json
import os
import platform
import statistics
import sys
from collections import defaultdict
from datetime import datetime, timezone


def cpuinfo(field):
    """The first /proc/cpuinfo line starting with field, after its colon ("" if none)."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_model():
    return cpuinfo("model name") or platform.processor()


def cpu_flags():
    """The SIMD flags that choose kernels, in both engines."""
    wanted = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_bf16")
    have = set(cpuinfo("flags").split())
    return " ".join(f for f in wanted if f in have) or "?"


def main(path):
    runs = defaultdict(list)  # (arch, type, test) -> engine -> [avg_ts per round]
    rss = defaultdict(int)    # (arch, type, engine) -> peak RSS in KiB over its tests
    threads = set()
    for line in open(path):
        r = json.loads(line)
        test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
        if r.get("n_depth"):
            test += f" @ d{r['n_depth']}"
        runs[(r["arch"], r["type"], test)].append((r["engine"], r["avg_ts"]))
        rss[(r["arch"], r["type"], r["engine"])] = max(rss[(r["arch"], r["type"], r["engine"])], r.get("peak_rss_kb", 0))
        threads.add(r.get("n_threads"))
    print(f"# warmstart vs llama.cpp (node-llama-cpp@3.21.1)\n")
    print(f"- CPU: {cpu_model()}  \n- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}  "
          f"\n- threads: {', '.join(str(t) for t in sorted(x for x in threads if x))}  \n- raw: {path}  "
          f"\n- CPU flags: {cpu_flags()}  \n- warmstart ISA: {os.environ.get('WARMSTART_ISA', 'best available')}  "
          f"\n- peer: {os.environ.get('COMPARE_PEER', 'bench/peer')}\n")
    print("| model | type | test | warmstart t/s (min..max) | llama.cpp t/s (min..max) | ratio |")
    print("|---|---|---|---|---|---|")
    for (arch, typ, test), rows in sorted(runs.items()):
        by = defaultdict(list)
        for e, ts in rows:
            by[e].append(ts)
        cell = lambda v: f"{statistics.median(v):.2f} ({min(v):.1f}..{max(v):.1f})" if v else "-"
        w, p = by.get("warmstart", []), by.get("peer", [])
        ratio = f"{statistics.median(w) / statistics.median(p):.2f}x" if w and p else "-"
        print(f"| {arch} | {typ} | {test} | {cell(w)} | {cell(p)} | {ratio} |")
    print("\n| model | type | peak RSS warmstart MiB | peak RSS llama.cpp (node) MiB |")
    print("|---|---|---|---|")
    for arch, typ in sorted({(a, t) for a, t, _ in runs}):
        mib = lambda e: f"{rss[(arch, typ, e)] / 1024:.0f}" if rss[(arch, typ, e)] else "-"
        print(f"| {arch} | {typ} | {mib('warmstart')} | {mib('peer')} |")


if __name__ == "__main__":
    main(sys.argv[1])
