#!/usr/bin/python3
"""warmstart's logits with a quantized KV cache against llama.cpp's with the same cache types.

    bench/kv_types_check.py [-m MODEL.gguf ...] [-k "f16 q8_0 q4_0"] [-t 2]

For each model (default: the F16/BF16 q256 fixtures with a golden) and cache type T, the
golden's random probe is evaluated by `warmstart logits --kv-type T` and by llama.cpp
through node-llama-cpp (bench/peer/logprobs.mjs, -ctk T -ctv T, flash attention on: llama.cpp
stores a quantized V only then). Compared per position: the next-token NLL, the argmax, and
the top-8 gaps (log p_j - log p_top1 against logit_j - logit_top1, for the ids both top-8s
hold). Prints a Markdown table. Not run in CI (needs bench/peer's node_modules).
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


def probe_tokens(model: pathlib.Path):
    golden = SHARED / "fixtures" / "golden" / (model.stem + ".json")
    if not golden.exists():
        sys.exit(f"no golden for {model.name}: its random probe gives the tokens")
    return json.loads(golden.read_text())["probes"][1]["tokens"]


def ours(model, tokens, kv, threads, tmp):
    out = pathlib.Path(tmp) / f"ws-{kv}"
    subprocess.run([str(ROOT / "build" / "warmstart"), "logits", "-m", str(model), "--tokens", ",".join(map(str, tokens)),
                    "--kv-type", kv, "-t", str(threads), "--out", str(out)], check=True, capture_output=True)
    return json.loads(out.with_suffix(".json").read_text())["probes"][0]


def peer(model, tokens, kv, threads):
    r = subprocess.run(["node", str(ROOT / "bench" / "peer" / "logprobs.mjs"), "-m", str(model), "--tokens",
                        ",".join(map(str, tokens)), "-ctk", kv, "-ctv", kv, "-t", str(threads)],
                       check=True, capture_output=True, text=True)
    return json.loads(r.stdout)


def compare(w, p):
    n = len(p["nll"])
    dnll = [abs(w["nll"][i] - p["nll"][i]) for i in range(n)]
    agree = sum(w["argmax"][i] == p["argmax"][i] for i in range(n)) / n
    gaps = []
    for i in range(n):
        mine = {t: v for t, v in w["top8"][i]}
        theirs = {t: v for t, v in p["top8"][i]}
        m0, t0 = w["top8"][i][0][1], p["top8"][i][0][1]
        gaps += [abs((mine[t] - m0) - (theirs[t] - t0)) for t in theirs if t in mine]
    mean_nll = lambda xs: sum(xs) / len(xs)
    return {"max_dnll": max(dnll), "mean_dnll": mean_nll(dnll), "dmean_nll": abs(mean_nll(w["nll"][:n]) - mean_nll(p["nll"])),
            "argmax": agree, "max_dgap": max(gaps), "mean_dgap": mean_nll(gaps)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", nargs="*", default=[str(SHARED / "fixtures/models" / f"{a}-q256-{t}.gguf")
                                            for a in ("llama", "lfm2") for t in ("f16", "bf16")])
    ap.add_argument("-k", default="f16 q8_0 q4_0")
    ap.add_argument("-t", type=int, default=2)
    a = ap.parse_args()
    print("| model | cache K/V | max dNLL | mean dNLL | d mean NLL | argmax agreement | max d top-8 gap | mean d top-8 gap |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for m in map(pathlib.Path, a.m):
            tokens = probe_tokens(m)
            for kv in a.k.split():
                c = compare(ours(m, tokens, kv, a.t, tmp), peer(m, tokens, kv, a.t))
                print(f"| {m.stem} | {kv} | {c['max_dnll']:.3g} | {c['mean_dnll']:.3g} | {c['dmean_nll']:.3g} | "
                      f"{c['argmax']:.4f} | {c['max_dgap']:.3g} | {c['mean_dgap']:.3g} |", flush=True)


if __name__ == "__main__":
    main()
