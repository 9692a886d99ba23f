#!/usr/bin/env python3
"""Multi-turn TTFT table (warmstart vs llama.cpp) from bench/compare_turns.sh's JSON lines.

Per model and scenario: the summed client-side TTFT of all requests (turnbench's ttft_s) on
each engine and their ratio (warmstart / peer: below 1 is better); for the edit scenario also
the TTFT of the edit turn itself (conversation 0, where the history diverges early); and the
prompt tokens each engine reused (usage.prompt_tokens_details.cached_tokens) out of all it
was sent. Replies differ between engines (random weights, different kernels), so the
histories, hence the prompt token counts, may differ slightly; the table shows both.
With several rounds (compare_turns.sh -k) each figure is the median over rounds, the range
in brackets, and the ratio is of the medians; token counts are from the first round."""
import json
import statistics
import sys
from collections import defaultdict
from datetime import datetime, timezone

from summarize_compare import cpu_model  # same folder


def fmt(values, digits):
    """Median of per-round values, with their range when there are several."""
    if not values:
        return "-"
    med = f"{statistics.median(values):.{digits}f}"
    return med if len(values) == 1 else f"{med} ({min(values):.{digits}f}..{max(values):.{digits}f})"


def main(path):
    meta = {}
    turns = defaultdict(lambda: defaultdict(list))  # (arch, type, scenario, engine) -> round -> turnbench rows
    for line in open(path):
        r = json.loads(line)
        if r.get("meta"):
            meta = r
        elif not r.get("summary"):
            turns[(r["arch"], r["type"], r["scenario"], r["engine"])][r.get("round", 1)].append(r)
    edit_at = meta.get("edit_at")
    print("# Multi-turn TTFT: warmstart vs llama.cpp (node-llama-cpp@3.21.1, bench/peer/server.mjs)\n")
    print(f"- CPU: {cpu_model()}  \n- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}  \n"
          f"- threads: {meta.get('threads')}, turns: {meta.get('turns')}, edit at turn {edit_at}, "
          f"rounds: {meta.get('rounds', 1)}  \n"
          f"- warmstart: {meta.get('warmstart')}  \n- raw: {path}\n")
    print("| model | type | scenario | Σ TTFT warmstart ms | Σ TTFT llama.cpp ms | ratio "
          "| edit turn warmstart ms | edit turn llama.cpp ms | edit ratio | cached/prompt warmstart | cached/prompt llama.cpp |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    total = lambda rows: sum(r["ttft_s"] for r in rows) * 1000
    edit = lambda rows: next((r["ttft_s"] * 1000 for r in rows if r["conv"] == 0 and r["turn"] == edit_at), None)
    cached = lambda rows: (f"{sum(r.get('cached_tokens') or 0 for r in rows)}/"
                           f"{sum(r.get('prompt_tokens') or 0 for r in rows)}" if rows else "-")
    ratio = lambda a, b: f"{statistics.median(a) / statistics.median(b):.2f}x" if a and b else "-"
    for arch, typ, scen in sorted({k[:3] for k in turns}):
        ws, peer = turns.get((arch, typ, scen, "warmstart"), {}), turns.get((arch, typ, scen, "peer"), {})
        ws_total, peer_total = [total(r) for r in ws.values()], [total(r) for r in peer.values()]
        cells = [fmt(ws_total, 0), fmt(peer_total, 0), ratio(ws_total, peer_total)]
        if scen == "edit":
            ws_edit = [e for e in map(edit, ws.values()) if e is not None]
            peer_edit = [e for e in map(edit, peer.values()) if e is not None]
            cells += [fmt(ws_edit, 1), fmt(peer_edit, 1), ratio(ws_edit, peer_edit)]
        else:
            cells += ["", "", ""]
        first = lambda rounds: rounds[min(rounds)] if rounds else []
        print(f"| {arch} | {typ} | {scen} | {' | '.join(cells)} | {cached(first(ws))} | {cached(first(peer))} |")


if __name__ == "__main__":
    main(sys.argv[1])
