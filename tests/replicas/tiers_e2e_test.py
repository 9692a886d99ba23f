#!/usr/bin/env python3
"""End to end, two scenarios on loopback.

Restart: a server with --cache-dir answers three turns of two conversations and is killed
with SIGKILL (its writer may be mid-write); a new server on the same directory answers
the fourth turns reusing the stored prefixes (cached_tokens > 0, timings.cache_tier ==
"disk"), each reply identical to a cold server's.

Replicas: deploy/replicas.sh (three `warmstart serve` replicas, one Redis, HAProxy
routing by prompt_cache_key) on loopback. Six conversations of eight turns go through
HAProxy; after the fourth turn the replica serving the first conversation is killed with
SIGKILL. Checks: every request is answered; every reply (text and per-token logprobs) is
identical to the same conversation on a single server; the turns that moved to another
replica reuse checkpoints from Redis (cached_tokens > 0, timings.cache_tier == "redis");
the survivors' /metrics count those Redis hits.

usage: tiers_e2e_test.py WARMSTART_BINARY MODEL.gguf"""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TURNS = [
    "Hi, my name is {name} and I live in {city}.",
    "My favourite colour is {colour}.",
    "What is {a} plus {b}?",
    "What is my name?",
    "Where do I live?",
    "What is my favourite colour?",
    "Thanks for the help!",
    "Tell me my name and my city again, please.",
]
PEOPLE = [("Dana", "Lisbon", "green", 3, 4), ("Orla", "Dublin", "red", 2, 5), ("Kenji", "Osaka", "blue", 1, 6),
          ("Amara", "Lagos", "yellow", 4, 4), ("Piotr", "Gdansk", "purple", 5, 2), ("Ines", "Porto", "orange", 6, 1)]
KILL_AFTER = 4  # turns completed before a replica is killed


def free_base_port():
    """A port P with P..P+10 free (HAProxy, three replicas, Redis at P+10), below the
    kernel's ephemeral range, where other tests' servers on port 0 and clients land."""
    low = 32768
    try:
        low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    for _ in range(200):
        base = random.randint(10000, max(10001, low - 12))
        try:
            for p in range(base, base + 11):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    raise RuntimeError("no free port range")


def post(port, body, timeout=120):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r), r.headers.get("X-Warmstart-Replica")


def wait_for(path_or_url, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if path_or_url.startswith("http"):
            try:
                urllib.request.urlopen(path_or_url, timeout=1).read()
                return True
            except (urllib.error.URLError, OSError):
                pass
        elif os.path.exists(path_or_url):
            return True
        time.sleep(0.1)
    return False


def request(messages, key):
    return {"messages": messages, "max_tokens": 10, "temperature": 0, "logprobs": True, "top_logprobs": 2,
            "prompt_cache_key": key}


def reply_of(j):
    choice = j["choices"][0]
    return choice["message"]["content"], [(t["token"], t["logprob"]) for t in choice["logprobs"]["content"]]


def start_server(binary, model, port, *flags):
    p = subprocess.Popen([binary, "serve", "-m", model, "--port", str(port), "-t", "2", *flags],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if not wait_for(f"http://127.0.0.1:{port}/health", 60):
        p.kill()
        raise RuntimeError(f"warmstart serve {' '.join(flags)} did not start: " + p.stderr.read1(4096).decode())
    return p


def messages_for(c, turns):
    name, city, colour, a, b = PEOPLE[c]
    return [TURNS[t].format(name=name, city=city, colour=colour, a=a, b=b) for t in range(turns)]


def restart_scenario(binary, model, failures):
    port = free_base_port()
    cache_dir = tempfile.mkdtemp(prefix="ws-cache-dir-")
    convs = [[], []]
    first = start_server(binary, model, port, "--cache-dir", cache_dir)
    try:
        for c in range(2):
            for text in messages_for(c, 3):
                convs[c].append({"role": "user", "content": text})
                j, _ = post(port, request(convs[c], f"c{c}"))
                convs[c].append({"role": "assistant", "content": reply_of(j)[0]})
    finally:
        first.kill()  # SIGKILL: whatever the writer was doing is cut short
        first.wait()
    second = start_server(binary, model, port, "--cache-dir", cache_dir)
    cold = start_server(binary, model, port + 1, "--cache-budget-mb", "0")
    try:
        for c in range(2):
            convs[c].append({"role": "user", "content": messages_for(c, 4)[3]})
            j, _ = post(port, request(convs[c], f"c{c}"))
            cached, tier = j["usage"]["prompt_tokens_details"]["cached_tokens"], j["timings"]["cache_tier"]
            print(f"restart: conversation {c} turn 4 reused {cached} tokens from {tier}")
            if cached <= 0 or tier != "disk":
                failures.append(f"restart: conversation {c} reused {cached} tokens from '{tier}' (expected > 0 from disk)")
            want = reply_of(post(port + 1, request(convs[c], f"c{c}"))[0])
            if reply_of(j) != want:
                failures.append(f"restart: conversation {c}: reply {reply_of(j)!r} differs from cold {want!r}")
    finally:
        for p in (second, cold):
            p.terminate()
            p.wait()


def main():
    binary, model = sys.argv[1], sys.argv[2]
    failures = []
    restart_scenario(binary, model, failures)
    state = tempfile.mkdtemp(prefix="ws-replicas-")
    base = free_base_port()
    deploy = subprocess.Popen([os.path.join(ROOT, "deploy", "replicas.sh"), "-m", model, "-p", str(base), "-s", state,
                               "-b", binary, "--", "-t", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    single = None
    try:
        if not wait_for(os.path.join(state, "ready"), 120):
            raise RuntimeError("deploy/replicas.sh did not come up:\n" + deploy.stdout.read1(65536).decode())
        convs = [[] for _ in PEOPLE]   # messages so far
        log = [[] for _ in PEOPLE]     # per turn: (replica, cached_tokens, cache_tier, reply)
        killed = None
        for turn in range(len(TURNS)):
            if turn == KILL_AFTER:
                killed = log[0][-1][0]
                pid = int(open(os.path.join(state, f"replica{killed[1:]}.pid")).read())
                os.kill(pid, signal.SIGKILL)
                print(f"killed replica {killed} (pid {pid}) after turn {turn}")
            for c, (name, city, colour, a, b) in enumerate(PEOPLE):
                convs[c].append({"role": "user", "content": TURNS[turn].format(name=name, city=city, colour=colour,
                                                                                a=a, b=b)})
                try:
                    j, replica = post(base, request(convs[c], f"conversation-{c}"))
                except (urllib.error.URLError, OSError) as e:
                    failures.append(f"conversation {c} turn {turn + 1}: no answer through HAProxy: {e}")
                    convs[c].append({"role": "assistant", "content": ""})
                    log[c].append((None, 0, "none", ("", [])))
                    continue
                text, _ = reply = reply_of(j)
                convs[c].append({"role": "assistant", "content": text})
                log[c].append((replica, j["usage"]["prompt_tokens_details"]["cached_tokens"],
                               j["timings"]["cache_tier"], reply))

        moved = 0
        for c in range(len(PEOPLE)):
            print(f"conversation {c}: " + ", ".join(f"{r}:{n}:{t}" for r, n, t, _ in log[c]))
            before = log[c][KILL_AFTER - 1][0]
            after = log[c][KILL_AFTER]
            if before == killed:
                moved += 1
                if after[0] == killed:
                    failures.append(f"conversation {c}: still sent to the killed replica {killed}")
                if after[1] <= 0 or after[2] != "redis":
                    failures.append(f"conversation {c} moved to {after[0]} but reused {after[1]} tokens from "
                                    f"'{after[2]}' (expected > 0 from redis)")
            for t in range(1, len(TURNS)):
                if log[c][t][1] <= 0:
                    failures.append(f"conversation {c} turn {t + 1}: nothing reused (replica {log[c][t][0]})")
        if moved == 0:
            failures.append("no conversation moved (the killed replica served none?)")

        # Redis hits as the survivors count them.
        hits = 0
        for i in (1, 2, 3):
            if f"r{i}" == killed:
                continue
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{base + i}/metrics", timeout=5).read().decode()
            for line in metrics.splitlines():
                if line.startswith('warmstart_tier_hits_total{tier="redis"}'):
                    hits += int(float(line.split()[-1]))
        if hits < moved:
            failures.append(f"the survivors' /metrics count {hits} Redis hits for {moved} moved conversations")

        # The same conversations on one server, one after the other.
        single_port = base + 5
        single = start_server(binary, model, single_port)
        for c in range(len(PEOPLE)):
            messages = []
            for t in range(len(TURNS)):
                messages.append(convs[c][2 * t])
                j, _ = post(single_port, request(messages, f"conversation-{c}"))
                reply = reply_of(j)
                if log[c][t][0] is not None and reply != log[c][t][3]:
                    failures.append(f"conversation {c} turn {t + 1}: replicated reply {log[c][t][3]!r} differs from "
                                    f"the single server's {reply!r}")
                messages.append({"role": "assistant", "content": reply[0]})
    finally:
        if single:
            single.terminate()
            single.wait()
        deploy.terminate()
        try:
            deploy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            deploy.kill()
    for f in failures:
        print("FAIL:", f)
    if failures:
        for name in sorted(os.listdir(state)):
            if name.endswith(".log"):
                print(f"--- {name} (last lines)")
                print("".join(open(os.path.join(state, name), errors="replace").readlines()[-8:]))
        sys.exit(1)
    print(f"ok: a restarted server reused from disk; {len(PEOPLE)} conversations x {len(TURNS)} turns through HAProxy, {moved} moved after the kill, "
          "all replies identical to a single server")


if __name__ == "__main__":
    main()
