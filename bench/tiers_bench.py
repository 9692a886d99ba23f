#!/usr/bin/env python3
"""TTFT of the next turn of a long conversation, by where its history's state comes from:
cold (recomputed), RAM (the server that answered the history), disk (a restarted server
with --cache-dir), Redis (another replica, with --cache-redis only). One run, servers
started and stopped here, rounds alternating; medians printed as a Markdown table.

With --replicas, the same through deploy/replicas.sh (three replicas, Redis, HAProxy routing
by prompt_cache_key): the next turn on the replica that answered the history (RAM), then,
that replica killed, on the one HAProxy moves the conversation to (Redis).

usage: bench/tiers_bench.py -m MODEL.gguf [-b build/warmstart] [-t THREADS] [-n HISTORY_TOKENS] [-r ROUNDS] [--replicas]
Needs redis-server (and haproxy for --replicas), Debian's packages. Writes nothing outside
a temporary folder."""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCES = [
    "The delivery van leaves the depot at seven and returns after the last stop in the hills.",
    "Invoices older than ninety days are sent to the accounts team with a short summary.",
    "Our spring catalogue lists forty new items, most of them garden tools and seed kits.",
    "The warehouse in the north keeps spare parts for the older models of the pumps.",
    "Customers who order before noon usually receive their parcels the next working day.",
    "The support line is open on weekdays, and on Saturdays in the weeks before holidays.",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_health(port, proc, seconds=120):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server on {port} exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server on {port} did not start")


def chat(port, messages, key=None):
    request = {"messages": messages, "max_tokens": 1, "temperature": 0}
    if key:
        request["prompt_cache_key"] = key
    body = json.dumps(request).encode()
    t0 = time.perf_counter()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        j = json.load(r)
        replica = r.headers.get("X-Warmstart-Replica")
    wall = (time.perf_counter() - t0) * 1000
    t = j["timings"]
    return {"wall_ms": wall, "ttft_ms": t["prompt_ms"], "cached": j["usage"]["prompt_tokens_details"]["cached_tokens"],
            "prompt": j["usage"]["prompt_tokens"], "tier": t["cache_tier"], "tier_bytes": t["tier_bytes"],
            "tier_ms": t["tier_ms"], "replica": replica}


class Server:
    def __init__(self, args, *flags):
        self.port = free_port()
        self.proc = subprocess.Popen([args.binary, "serve", "-m", args.model, "--port", str(self.port), "-t",
                                      str(args.threads), "-c", str(args.ctx), *flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_health(self.port, self.proc)
        # First requests of a fresh process: the weights' pages come in (and are packed for
        # batches) here, not in the measurement.
        for n in (1, 3):
            chat(self.port, [{"role": "user", "content": " ".join(SENTENCES[:n]) + " Warm up."}])

    def stop(self):
        self.proc.terminate()  # SIGTERM: the tiers write what is queued before exit
        self.proc.wait()


def history(tokens_wanted):
    """System prompt and alternating turns, about tokens_wanted tokens (~20 a sentence)."""
    msgs = [{"role": "system", "content": "You are the assistant of a small mail-order shop."}]
    i = 0
    while i * 24 < tokens_wanted:
        role = "user" if len(msgs) % 2 == 1 else "assistant"
        text = " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(6))
        msgs.append({"role": role, "content": f"({i}) {text}"})
        i += 6
    if msgs[-1]["role"] != "user":
        msgs.append({"role": "user", "content": "Please summarise the above."})
    return msgs


def next_turn(hist, variant):
    return hist + [{"role": "assistant", "content": "Here is a short summary of our conversation."},
                   {"role": "user", "content": f"Thanks. Question {variant}: when does the van leave?"}]


def replicas(args, hist):
    """RAM and Redis through HAProxy: rounds of (history, next turn, kill its replica, next turn)."""
    results = {"RAM (same replica, via HAProxy)": [], "Redis (moved replica, via HAProxy)": []}
    for rnd in range(args.rounds):
        state = tempfile.mkdtemp(prefix="ws-tiers-bench-replicas-")
        port = 20000 + (os.getpid() + 97 * rnd) % 10000
        deploy = subprocess.Popen([os.path.join(ROOT, "deploy", "replicas.sh"), "-m", args.model, "-p", str(port),
                                   "-s", state, "-b", args.binary, "--", "-t", str(args.threads), "-c", str(args.ctx)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not os.path.exists(os.path.join(state, "ready")):
                if deploy.poll() is not None:
                    raise RuntimeError("deploy/replicas.sh exited")
                time.sleep(0.2)
            for i in (1, 2, 3):  # warm every replica up (weights paged in and packed)
                for n in (1, 3):
                    chat(port + i, [{"role": "user", "content": " ".join(SENTENCES[:n]) + " Warm up."}])
            key = f"bench-{rnd}"
            chat(port, hist, key)
            ram = chat(port, next_turn(hist, f"{rnd}a"), key)
            results["RAM (same replica, via HAProxy)"].append(ram)
            time.sleep(1)  # the replica's writer hands the checkpoints to Redis
            os.kill(int(open(os.path.join(state, f"replica{ram['replica'][1:]}.pid")).read()), 9)
            time.sleep(2)  # HAProxy's health checks take it out of the ring
            moved = chat(port, next_turn(hist, f"{rnd}b"), key)
            results["Redis (moved replica, via HAProxy)"].append(moved)
            print(f"replicas round {rnd + 1}: RAM on {ram['replica']} {ram['ttft_ms']:.0f} ms, Redis on "
                  f"{moved['replica']} {moved['ttft_ms']:.0f} ms", file=sys.stderr)
        finally:
            deploy.terminate()
            deploy.wait()
            shutil.rmtree(state, ignore_errors=True)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-b", "--binary", default=os.path.join(ROOT, "build", "warmstart"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", "--history", type=int, default=4000)
    ap.add_argument("-c", "--ctx", type=int, default=8192)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("--replicas", action="store_true", help="through deploy/replicas.sh instead")
    args = ap.parse_args()
    if args.replicas:
        results = replicas(args, history(args.history))
        print_table(args, results, None)
        return
    work = tempfile.mkdtemp(prefix="ws-tiers-bench-")
    redis_port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", work, "--logfile", "redis.log"])
    results = {k: [] for k in ("cold", "RAM", "disk (restarted)", "Redis (another replica)")}
    try:
        hist = history(args.history)
        for rnd in range(args.rounds):
            cache_dir = os.path.join(work, f"dir{rnd}")
            redis_flags = ["--cache-redis", f"127.0.0.1:{redis_port}", "--cache-redis-prefix", f"bench{rnd}:"]
            first = Server(args, "--cache-dir", cache_dir, *redis_flags)
            filled = chat(first.port, hist)  # the history's turn: checkpoints go to RAM, disk and Redis
            results["RAM"].append(chat(first.port, next_turn(hist, f"{rnd}a")))
            first.stop()
            for name, flags, variant in (("disk (restarted)", ["--cache-dir", cache_dir], "b"),
                                         ("Redis (another replica)", redis_flags, "c"),
                                         ("cold", [], "d")):
                s = Server(args, *flags)
                results[name].append(chat(s.port, next_turn(hist, f"{rnd}{variant}")))
                s.stop()
            print(f"round {rnd + 1}: history {filled['prompt']} tokens; " +
                  ", ".join(f"{k} {v[-1]['ttft_ms']:.0f} ms" for k, v in results.items()), file=sys.stderr)
    finally:
        redis.terminate()
        redis.wait()
        shutil.rmtree(work, ignore_errors=True)
    print_table(args, results, statistics.median(r["ttft_ms"] for r in results["cold"]))


def print_table(args, results, cold):
    prompt = next(iter(results.values()))[0]["prompt"]
    print(f"\nNext turn of a {prompt}-token conversation ({os.path.basename(args.model)}, {args.threads} threads, "
          f"median of {args.rounds}; TTFT = the server's prompt_ms, wall = the client's request with max_tokens 1)\n")
    print("| history from | reused tokens | TTFT ms | vs cold | wall ms | moved from the tier | tier lookup + transfer |")
    print("|---|---|---|---|---|---|---|")
    for name, rs in results.items():
        ttft = statistics.median(r["ttft_ms"] for r in rs)
        wall = statistics.median(r["wall_ms"] for r in rs)
        moved = statistics.median(r["tier_bytes"] for r in rs) / (1 << 20)
        tier_ms = statistics.median(r["tier_ms"] for r in rs)
        ratio = f"{ttft / cold:.3f}x" if cold else "-"
        print(f"| {name} | {rs[0]['cached']} | {ttft:.1f} | {ratio} | {wall:.1f} | "
              f"{moved:.1f} MiB | {tier_ms:.1f} ms |")


if __name__ == "__main__":
    main()
