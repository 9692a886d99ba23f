#!/usr/bin/env python3
"""Multi-turn TTFT table (warmstart vs llama.cpp) from bench/compare_turns.sh's JSON lines.

Per model and scenario: the summed client-side TTFT of all requests (turnbench's ttft_s) on
each engine and their ratio (warmstart / peer: below 1 is better); for the edit scenario also
the TTFT of the edit turn itself (conversation 0, where the history diverges early); and the
prompt tokens each engine reused (usage.prompt_tokens_details.cached_tokens) out of all it
was sent. Replies differ between engines (random weights, different kernels), so the
histories, hence the prompt token counts, may differ slightly; the table shows both."""
import json
import sys
from collections import defaultdict
from datetime import datetime, timezone

from summarize_compare import cpu_model  # same folder


def main(path):
    meta = {}
    turns = defaultdict(list)  # (arch, type, scenario, engine) -> turnbench rows
    for line in open(path):
        r = json.loads(line)
        if r.get("meta"):
            meta = r
        elif not r.get("summary"):
            turns[(r["arch"], r["type"], r["scenario"], r["engine"])].append(r)
    edit_at = meta.get("edit_at")
    print("# Multi-turn TTFT: warmstart vs llama.cpp (node-llama-cpp@3.21.1, bench/peer/server.mjs)\n")
    print(f"- CPU: {cpu_model()}  \n- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}  \n"
          f"- threads: {meta.get('threads')}, turns: {meta.get('turns')}, edit at turn {edit_at}  \n"
          f"- warmstart: {meta.get('warmstart')}  \n- raw: {path}\n")
    print("| model | type | scenario | Σ TTFT warmstart ms | Σ TTFT llama.cpp ms | ratio "
          "| edit turn warmstart ms | edit turn llama.cpp ms | edit ratio | cached/prompt warmstart | cached/prompt llama.cpp |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"
    for arch, typ, scen in sorted({k[:3] for k in turns}):
        ws, peer = turns.get((arch, typ, scen, "warmstart"), []), turns.get((arch, typ, scen, "peer"), [])
        total = lambda rows: sum(r["ttft_s"] for r in rows) * 1000
        cached = lambda rows: (f"{sum(r.get('cached_tokens') or 0 for r in rows)}/"
                               f"{sum(r.get('prompt_tokens') or 0 for r in rows)}" if rows else "-")
        edit = lambda rows: next((r["ttft_s"] * 1000 for r in rows if r["conv"] == 0 and r["turn"] == edit_at), 0)
        cells = [f"{total(ws):.0f}" if ws else "-", f"{total(peer):.0f}" if peer else "-", ratio(total(ws), total(peer))]
        if scen == "edit":
            cells += [f"{edit(ws):.1f}" if ws else "-", f"{edit(peer):.1f}" if peer else "-", ratio(edit(ws), edit(peer))]
        else:
            cells += ["", "", ""]
        print(f"| {arch} | {typ} | {scen} | {' | '.join(cells)} | {cached(ws)} | {cached(peer)} |")


if __name__ == "__main__":
    main(sys.argv[1])
