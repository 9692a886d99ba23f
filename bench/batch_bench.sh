#!/usr/bin/env bash
# Concurrent streams on `warmstart serve --parallel NP` (issue 22: continuous batching across
# slots), optionally against llama.cpp serving NP sequences in one batched context
# (bench/peer/batch_server.mjs, node-llama-cpp@3.21.1), with bench/batch_bench.mjs as the
# client. Never run in CI.
#
#   bench/batch_bench.sh MODEL.gguf [-t 2] [-np 8] [-c CTX] [-r REPS] [--peer] [-n 128] [--tg 128]
#                        [--concurrency 1,2,4,8,16] [--prompts 16,1000] [--stall-prompt 4000]
#                        [--scenarios conc,ttft,stall] [-- MORE batch_bench.mjs OPTIONS]
#
#   --peer  also run the peer; with -r, the engines alternate (warmstart first on even rounds)
#   -c      context per slot (warmstart's -c; the peer's -c is per sequence too, so
#           llama-server's equivalent is -c CTX*NP); default: the longest request + 256
#   WARMSTART=path/to/warmstart (default build/warmstart); RESULTS=dir (default bench/results)
#
# Per round: `warmstart bench -p 0 -n TG` (tg128 for the single-stream comparison), then each
# engine started on a free port, the client's scenarios (concurrency runs for every prompt
# length, TTFT under load with NP-1 streams decoding, the stall of NP-1 decoding streams while
# a long prompt is ingested), and the server stopped. Writes bench/results/batch-STAMP.jsonl
# (one line per measurement; rss_hwm_mib is the server's VmHWM after that measurement) and
# batch-STAMP.md (tables and the ratios side by side).
set -euo pipefail
cd "$(dirname "$0")/.."

model="" threads=2 np=8 ctx="" reps=1 peer=0 n=128 conc="1,2,4,8,16" prompts="16,1000" stall=4000
scenarios="conc,ttft,stall" extra=() tgn=128
while (($#)); do
  case "$1" in
    -t) threads="$2"; shift 2 ;;
    -np|--parallel) np="$2"; shift 2 ;;
    -c) ctx="$2"; shift 2 ;;
    -r) reps="$2"; shift 2 ;;
    -n) n="$2"; shift 2 ;;
    --tg) tgn="$2"; shift 2 ;;
    --peer) peer=1; shift ;;
    --concurrency) conc="$2"; shift 2 ;;
    --prompts) prompts="$2"; shift 2 ;;
    --stall-prompt) stall="$2"; shift 2 ;;
    --scenarios) scenarios="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "batch_bench.sh: unknown option $1" >&2; exit 2 ;;
    *) model="$1"; shift ;;
  esac
done
[ -n "$model" ] || { sed -n '7,14p' "$0" >&2; exit 2; }
ws="${WARMSTART:-build/warmstart}"
[ -x "$ws" ] || { echo "batch_bench.sh: no warmstart binary at $ws (set WARMSTART)" >&2; exit 2; }
if ((peer)) && [ ! -d bench/peer/node_modules/node-llama-cpp ]; then (cd bench/peer && npm ci --no-audit --no-fund); fi
if [ -z "$ctx" ]; then  # the longest request (prompt + max_tokens) with room for tokenization slack
  longest=$(tr , '\n' <<<"$prompts" | sort -n | tail -1)
  need=$((longest + n)); ((stall + 8 > need)) && need=$((stall + 8))
  ((need < 1024 + 64)) && need=$((1024 + 64))  # the decoding streams of the TTFT and stall scenarios
  ctx=$((need + 256))
fi
maxk=$(tr , '\n' <<<"$conc" | sort -n | tail -1)
side=$((np > 1 ? np - 1 : 1))  # streams decoding in the TTFT and stall scenarios

results="${RESULTS:-bench/results}"
mkdir -p "$results"
stamp=$(date -u +%Y%m%d-%H%M%S)
raw="$results/batch-$stamp.jsonl" md="$results/batch-$stamp.md"
logs=$(mktemp -d /tmp/batch-bench.XXXXXX)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; true; }
trap cleanup EXIT

# Waits for the server's "listening on http://HOST:PORT" line; prints the URL.
wait_url() {
  local log="$1" i url
  for ((i = 0; i < 600; ++i)); do
    url=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$log" | head -1 | sed 's/listening on //') || true
    if [ -n "$url" ] && curl -sf "$url/health" >/dev/null; then echo "$url"; return 0; fi
    kill -0 "$pid" 2>/dev/null || { echo "batch_bench.sh: server exited:" >&2; cat "$log" >&2; return 1; }
    sleep 0.5
  done
  echo "batch_bench.sh: server did not come up:" >&2; cat "$log" >&2; return 1
}

run_engine() {  # engine round
  local engine="$1" rep="$2" log="$logs/$1-$2.log" url
  if [ "$engine" = warmstart ]; then
    "$ws" serve -m "$model" --parallel "$np" -t "$threads" -c "$ctx" --port 0 --queue $((maxk + 16)) 2>"$log" &
  else
    node bench/peer/batch_server.mjs -m "$model" -t "$threads" -c "$ctx" -np "$np" --port 0 2>"$log" &
  fi
  pid=$!
  url=$(wait_url "$log")
  echo "== $engine (round $rep): $(grep -o 'listening on.*' "$log" | head -1)" >&2
  node bench/batch_bench.mjs --url "$url" --engine "$engine" --server-pid "$pid" --rep "$rep" --seed $((rep + 1)) \
    --concurrency "$conc" --prompts "$prompts" -n "$n" --scenarios "$scenarios" --np "$np" \
    --load-streams "$side" --stall-streams "$side" --stall-prompt "$stall" --jsonl "$raw" "${extra[@]}" >/dev/null
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
}

for ((rep = 0; rep < reps; ++rep)); do
  # tg at the same -t: the single-stream reference (issue 22: "within 5% of bench tg128")
  tg=$("$ws" bench -m "$model" -t "$threads" -p 0 -n "$tgn" --json 2>/dev/null |
    node -e 'let s="";process.stdin.on("data",(c)=>(s+=c)).on("end",()=>{let rows=[];try{rows=[].concat(JSON.parse(s))}catch{}
      const r=rows.find((r)=>r.n_gen>0&&!r.n_prompt);process.stdout.write(r?String(r.avg_ts):"")})')
  echo "== warmstart bench tg$tgn (round $rep): ${tg:-?} tok/s" >&2
  [ -n "$tg" ] && echo "{\"engine\":\"warmstart\",\"scenario\":\"bench\",\"rep\":$rep,\"n_gen\":$tgn,\"threads\":$threads,\"tps\":$tg}" >>"$raw"
  engines=(warmstart)
  if ((peer)); then ((rep % 2)) && engines=(peer warmstart) || engines=(warmstart peer); fi
  for e in "${engines[@]}"; do run_engine "$e" "$rep"; done
done

{
  echo "# Concurrent streams: $(basename "$model"), -t $threads, $np slots, -c $ctx per slot, $reps round(s)"
  echo
  echo "warmstart $("$ws" --version 2>/dev/null || echo "at $ws"), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs;" \
    "max_tokens $n, concurrency $conc, prompts $prompts tokens, TTFT/stall with $side decoding streams," \
    "stall prompt $stall tokens. Raw: \`$raw\`."
  echo
  node bench/batch_bench.mjs --summarize "$raw" --np "$np"
} >"$md"
cat "$md"
echo "batch_bench.sh: wrote $raw and $md" >&2
