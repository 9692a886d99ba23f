// Concurrent-streams benchmark of an OpenAI-style POST /v1/completions server (issue 22:
// continuous batching across slots): `warmstart serve --parallel N` or the peer
// bench/peer/batch_server.mjs (llama.cpp with N sequences batched). Node 20, no dependencies.
// Never run in CI; bench/batch_bench.sh drives it.
//
//   node bench/batch_bench.mjs --url http://127.0.0.1:PORT --engine NAME [options]   # measure
//   node bench/batch_bench.mjs --summarize A.jsonl [B.jsonl ...] [--np 8]             # tables + ratios
//
// Options of a measurement run (defaults in brackets):
//   --concurrency 1,2,4,8,16   streams started at once, per run
//   --prompts 16,1000          prompt lengths in tokens (calibrated with POST /tokenize when served)
//   -n 128                     max_tokens of every stream in the concurrency runs
//   --scenarios conc,ttft,stall
//   --load-streams 7           ttft: streams decoding when the probe arrives
//   --load-max-tokens 1024     ttft/stall: max_tokens of those streams (they are cut off when done)
//   --probe-prompt 16 --probe-n 8   ttft: the probe request (same length, other text, when idle)
//   --stall-streams 7 --stall-prompt 4000   stall: streams decoding, then one long prompt arrives
//   --seed 1 --rep 0 --server-pid PID (peak RSS from /proc/PID/status VmHWM) --jsonl FILE --md FILE
//
// Every request: stream true, temperature 0, ignore_eos true (llama-server's and the peer's
// way to get exactly max_tokens; other servers may ignore it), stream_options.include_usage.
// Generated tokens are counted from usage.completion_tokens (else timings.predicted_n, else
// the chunks); times come from the arrival of each text chunk (one per token on both servers).
// Every prompt is a distinct word sequence (seeded per run and stream), so no prefix cache helps.
//
// Per run it writes one JSON line: per stream TTFT, tokens, inter-chunk gaps (p50, max),
// decode tok/s; in all: agg_tps = generated tokens / (first first token -> last token),
// total_tps = generated tokens / (first request sent -> last token).
import fs from "node:fs";
import http from "node:http";

// ---------- arguments ----------
function parseArgs(argv) {
  const a = {
    url: "", engine: "server", concurrency: [1, 2, 4, 8, 16], prompts: [16, 1000], n: 128,
    scenarios: ["conc", "ttft", "stall"], loadStreams: 7, loadMaxTokens: 1024, probePrompt: 16, probeN: 8,
    stallStreams: 7, stallPrompt: 4000, seed: 1, rep: 0, serverPid: 0, jsonl: "", md: "", summarize: [], np: 8,
  };
  const list = (v) => v.split(",").filter(Boolean);
  const nums = (v) => list(v).map(Number);
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i], v = argv[i + 1];
    const take = () => (++i, v);
    if (k === "--url") a.url = take().replace(/\/$/, "");
    else if (k === "--engine") a.engine = take();
    else if (k === "--concurrency") a.concurrency = nums(take());
    else if (k === "--prompts") a.prompts = nums(take());
    else if (k === "-n") a.n = Number(take());
    else if (k === "--scenarios") a.scenarios = list(take());
    else if (k === "--load-streams") a.loadStreams = Number(take());
    else if (k === "--load-max-tokens") a.loadMaxTokens = Number(take());
    else if (k === "--probe-prompt") a.probePrompt = Number(take());
    else if (k === "--probe-n") a.probeN = Number(take());
    else if (k === "--stall-streams") a.stallStreams = Number(take());
    else if (k === "--stall-prompt") a.stallPrompt = Number(take());
    else if (k === "--seed") a.seed = Number(take());
    else if (k === "--rep") a.rep = Number(take());
    else if (k === "--server-pid") a.serverPid = Number(take());
    else if (k === "--jsonl") a.jsonl = take();
    else if (k === "--md") a.md = take();
    else if (k === "--np") a.np = Number(take());
    else if (k === "--summarize") {
      while (i + 1 < argv.length && !argv[i + 1].startsWith("--")) a.summarize.push(argv[++i]);
    } else throw new Error(`unknown argument ${k}`);
  }
  if (!a.url && !a.summarize.length) throw new Error("usage: batch_bench.mjs --url URL --engine NAME [...] | --summarize FILE.jsonl...");
  return a;
}

// ---------- small helpers ----------
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();
const round = (x, d = 1) => (x == null || !Number.isFinite(x) ? null : Math.round(x * 10 ** d) / 10 ** d);
function quantile(xs, q) {
  if (!xs.length) return null;
  const s = [...xs].sort((p, r) => p - r);
  const pos = (s.length - 1) * q, lo = Math.floor(pos), hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}
const mean = (xs) => (xs.length ? xs.reduce((p, r) => p + r, 0) / xs.length : null);
const maxOf = (xs) => (xs.length ? Math.max(...xs) : null);

function peakRssMiB(pid) {
  if (!pid) return null;
  try {
    const m = fs.readFileSync(`/proc/${pid}/status`, "utf8").match(/VmHWM:\s+(\d+) kB/);
    return m ? round(Number(m[1]) / 1024, 0) : null;
  } catch { return null; }
}

// ---------- prompts: seeded word sequences ----------
const WORDS = ("the of and to in is was for on that with as by at from his her it an be are this which or had " +
  "not but all were when there can more one would their has been if will so no time people year way day man " +
  "world life hand part child eye woman place work week case point government company number group problem " +
  "fact water city house river mountain garden window table paper letter music story history science market " +
  "money power light night morning summer winter spring road train ship bridge island forest field stone " +
  "fire wind rain snow color sound voice game team school student teacher doctor friend family mother father " +
  "brother sister king queen army war peace law court church art book film picture song word name line side " +
  "head face body door room floor wall food bread milk sugar salt tree flower grass bird horse dog fish " +
  "small large old new young long short high low early late good great important public free red green blue " +
  "black white open close run walk write read speak think know find give tell ask call move live build keep " +
  "begin bring carry change follow grow learn leave lose meet pay play show start stop turn watch").split(" ");

function rng(seed) {  // mulberry32
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function words(seed, n) {
  const r = rng(seed);
  const out = [];
  for (let i = 0; i < n; ++i) out.push(WORDS[Math.floor(r() * WORDS.length)]);
  return out.join(" ");
}

let tokensPerWord = null;  // calibrated once per server with POST /tokenize; 1 when it has none
async function countTokens(url, text) {
  try {
    const r = await request(url, "/tokenize", { content: text });
    return Array.isArray(r?.tokens) ? r.tokens.length : null;
  } catch { return null; }
}
async function calibrate(url) {
  if (tokensPerWord != null) return;
  const n = await countTokens(url, words(987654321, 400));
  tokensPerWord = n ? n / 400 : 1;
}
// A prompt of about `tokens` tokens, distinct for every seed (the first words already differ).
const makePrompt = (seed, tokens) => words(seed, Math.max(1, Math.round(tokens / tokensPerWord)));

// ---------- HTTP ----------
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });

function request(base, path, body, method = "POST") {
  return new Promise((resolve, reject) => {
    const u = new URL(base + path);
    const data = body == null ? null : JSON.stringify(body);
    const req = http.request({ hostname: u.hostname, port: u.port, path: u.pathname, method, agent,
      headers: data ? { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) } : {} }, (res) => {
      let raw = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (raw += c));
      res.on("end", () => {
        if (res.statusCode !== 200) return reject(new Error(`${path}: HTTP ${res.statusCode} ${raw.slice(0, 300)}`));
        try { resolve(JSON.parse(raw)); } catch (e) { reject(e); }
      });
    });
    req.on("error", reject);
    req.end(data ?? undefined);
  });
}

// One streaming completion. Returns a handle: { done (promise of the record), abort(), r (live record) }.
// r.times: arrival time of every text chunk (one per token); r.tFirst: the first one.
function stream(base, prompt, maxTokens) {
  const body = { prompt, max_tokens: maxTokens, temperature: 0, stream: true, ignore_eos: true,
    stream_options: { include_usage: true } };
  const r = { tSend: now(), tFirst: null, tEnd: null, times: [], usage: null, timings: null, finish: null,
    error: null, aborted: false, chunks: 0 };
  let req;
  const done = new Promise((resolve) => {
    const u = new URL(base + "/v1/completions");
    const data = JSON.stringify(body);
    const finish = (err) => {
      if (r.tEnd != null) return;
      r.tEnd = now();
      if (err && !r.aborted && !r.error) r.error = String(err?.message ?? err);
      resolve(r);
    };
    req = http.request({ hostname: u.hostname, port: u.port, path: u.pathname, method: "POST", agent,
      headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) } }, (res) => {
      res.setEncoding("utf8");
      if (res.statusCode !== 200) {
        let raw = "";
        res.on("data", (c) => (raw += c));
        res.on("end", () => finish(`HTTP ${res.statusCode} ${raw.slice(0, 300)}`));
        return;
      }
      let buf = "";
      res.on("data", (c) => {
        const t = now();
        buf += c;
        let at;
        while ((at = buf.indexOf("\n\n")) >= 0) {
          const ev = buf.slice(0, at);
          buf = buf.slice(at + 2);
          for (const line of ev.split("\n")) {
            if (!line.startsWith("data:")) continue;
            const payload = line.slice(5).trim();
            if (payload === "[DONE]") continue;
            let obj;
            try { obj = JSON.parse(payload); } catch { continue; }
            if (obj.error) r.error = obj.error.message ?? JSON.stringify(obj.error);
            if (obj.usage) r.usage = obj.usage;
            if (obj.timings) r.timings = obj.timings;
            const ch = obj.choices?.[0];
            if (!ch) continue;
            if (ch.finish_reason != null) r.finish = ch.finish_reason;
            else if (typeof ch.text === "string") {
              r.chunks++;
              r.times.push(t);
              if (r.tFirst == null) r.tFirst = t;
            }
          }
        }
      });
      res.on("end", () => finish(null));
      res.on("error", (e) => finish(e));
      res.on("aborted", () => finish("response aborted"));
    });
    req.on("error", (e) => finish(e));
    req.end(data);
  });
  return { r, done, abort: () => { r.aborted = true; req?.destroy(); } };
}

const tokensOf = (r) => r.usage?.completion_tokens ?? r.timings?.predicted_n ?? r.times.length;
const gapsOf = (r) => r.times.slice(1).map((t, i) => t - r.times[i]);

function streamSummary(r) {
  const gaps = gapsOf(r);
  const tokens = tokensOf(r);
  const decodeS = r.times.length > 1 ? (r.times.at(-1) - r.tFirst) / 1000 : null;
  return {
    ttft_ms: r.tFirst == null ? null : round(r.tFirst - r.tSend), tokens, chunks: r.chunks,
    prompt_tokens: r.usage?.prompt_tokens ?? r.timings?.prompt_n ?? null,
    gap_p50_ms: round(quantile(gaps, 0.5)), gap_max_ms: round(maxOf(gaps)),
    // decode rate of this stream from its chunks: (chunks - 1) / (first -> last chunk)
    decode_tps: decodeS ? round((r.times.length - 1) / decodeS, 2) : null,
    finish: r.finish, error: r.error,
  };
}

// Waits until the server reports no busy slot (GET /slots, llama-server's shape); else a pause.
async function waitIdle(base, timeoutMs = 60000) {
  const t0 = now();
  while (now() - t0 < timeoutMs) {
    let slots;
    try { slots = await request(base, "/slots", null, "GET"); } catch { await sleep(1500); return; }
    if (!Array.isArray(slots)) { await sleep(1500); return; }
    if (!slots.some((s) => s.is_processing)) return;
    await sleep(100);
  }
}

// Resolves when every live stream has `n` chunks, or has ended.
async function waitTokens(handles, n, timeoutMs = 600000) {
  const t0 = now();
  while (now() - t0 < timeoutMs) {
    if (handles.every((h) => h.r.tEnd != null || h.r.times.length >= n)) return;
    await sleep(5);
  }
}

// ---------- scenarios ----------
let seedCounter = 0;
const nextSeed = (a) => (a.seed * 1000003 + a.rep * 7919 + ++seedCounter * 104729) >>> 0;

async function runConc(a, k, promptTokens) {
  await waitIdle(a.url);
  const prompts = Array.from({ length: k }, () => makePrompt(nextSeed(a), promptTokens));
  const t0 = now();
  const hs = prompts.map((p) => stream(a.url, p, a.n));
  const rs = await Promise.all(hs.map((h) => h.done));
  const per = rs.map(streamSummary);
  const firsts = rs.filter((r) => r.tFirst != null).map((r) => r.tFirst);
  const lasts = rs.filter((r) => r.times.length).map((r) => r.times.at(-1));
  const total = per.reduce((s, p) => s + (p.error ? 0 : p.tokens), 0);
  const span = lasts.length ? (Math.max(...lasts) - Math.min(...firsts)) / 1000 : null;
  const wall = lasts.length ? (Math.max(...lasts) - t0) / 1000 : null;
  const gaps = rs.flatMap(gapsOf);
  const ttfts = per.map((p) => p.ttft_ms).filter((x) => x != null);
  return {
    scenario: "conc", k, prompt_target: promptTokens, max_tokens: a.n,
    prompt_tokens: round(mean(per.map((p) => p.prompt_tokens).filter((x) => x != null)), 0),
    tokens_total: total, span_s: round(span, 3), wall_s: round(wall, 3),
    agg_tps: span ? round(total / span, 2) : null, total_tps: wall ? round(total / wall, 2) : null,
    stream_tps_p50: round(quantile(per.map((p) => p.decode_tps).filter((x) => x != null), 0.5), 2),
    ttft_ms_p50: round(quantile(ttfts, 0.5)), ttft_ms_max: round(maxOf(ttfts)),
    gap_ms_p50: round(quantile(gaps, 0.5)), gap_ms_max: round(maxOf(gaps)),
    errors: per.filter((p) => p.error).length, short_streams: per.filter((p) => !p.error && p.tokens < a.n).length,
    rss_hwm_mib: peakRssMiB(a.serverPid), streams: per,
  };
}

// Starts `count` streams of short prompts that decode up to a.loadMaxTokens, waits until each has
// `warm` tokens. The caller aborts them.
async function startLoad(a, count, warm) {
  const hs = Array.from({ length: count }, () => stream(a.url, makePrompt(nextSeed(a), 16), a.loadMaxTokens));
  await waitTokens(hs, warm);
  return hs;
}
async function stopLoad(hs) {
  for (const h of hs) h.abort();
  await Promise.all(hs.map((h) => h.done));
}

async function runTtft(a) {
  await waitIdle(a.url);
  const idle = await stream(a.url, makePrompt(nextSeed(a), a.probePrompt), a.probeN).done;
  await waitIdle(a.url);
  const load = await startLoad(a, a.loadStreams, 3);
  const alive = () => load.filter((h) => h.r.tEnd == null).length;
  const aliveAtSend = alive();
  const probe = await stream(a.url, makePrompt(nextSeed(a), a.probePrompt), a.probeN).done;
  const aliveAtEnd = alive();
  await stopLoad(load);
  const si = streamSummary(idle), sl = streamSummary(probe);
  return {
    scenario: "ttft", load_streams: a.loadStreams, probe_prompt_target: a.probePrompt, probe_n: a.probeN,
    probe_prompt_tokens: sl.prompt_tokens, ttft_idle_ms: si.ttft_ms, ttft_load_ms: sl.ttft_ms,
    ttft_ratio: si.ttft_ms && sl.ttft_ms ? round(sl.ttft_ms / si.ttft_ms, 2) : null,
    probe_gap_p50_idle_ms: si.gap_p50_ms, probe_gap_p50_load_ms: sl.gap_p50_ms,
    load_alive_at_send: aliveAtSend, load_alive_at_end: aliveAtEnd,
    errors: [si, sl, ...load.map((h) => streamSummary(h.r))].filter((p) => p.error).length,
    rss_hwm_mib: peakRssMiB(a.serverPid), probe_idle: si, probe_load: sl,
  };
}

async function runStall(a) {
  await waitIdle(a.url);
  const bg = await startLoad(a, a.stallStreams, 5);
  const tSend = now();
  const big = await stream(a.url, makePrompt(nextSeed(a), a.stallPrompt), 4).done;
  const tIn = big.tFirst ?? big.tEnd;  // ingestion window: [tSend, tIn]
  const t1 = now();
  // a little of the decoding after the ingestion, so a gap that ends after it is seen whole
  while (now() - t1 < 5000 && !bg.every((h) => h.r.tEnd != null || (h.r.times.at(-1) ?? 0) > tIn)) await sleep(5);
  await sleep(200);
  const aliveAtEnd = bg.filter((h) => h.r.tEnd == null).length;
  await stopLoad(bg);
  const per = bg.map((h) => {
    const ts = h.r.times;
    let during = null, before = [], inWindow = 0;
    for (let i = 1; i < ts.length; ++i) {
      const g = ts[i] - ts[i - 1];
      if (ts[i] > tSend && ts[i - 1] < tIn) during = Math.max(during ?? 0, g);  // overlaps the window
      else if (ts[i] <= tSend) before.push(g);
    }
    for (const t of ts) if (t > tSend && t <= tIn) inWindow++;
    return { gap_max_during_ms: round(during), gap_p50_before_ms: round(quantile(before, 0.5)), tokens_during: inWindow };
  });
  const windowS = (tIn - tSend) / 1000;
  const sb = streamSummary(big);
  return {
    scenario: "stall", stall_streams: a.stallStreams, stall_prompt_target: a.stallPrompt,
    stall_prompt_tokens: sb.prompt_tokens, big_ttft_ms: sb.ttft_ms, window_s: round(windowS, 3),
    gap_max_during_ms: round(maxOf(per.map((p) => p.gap_max_during_ms).filter((x) => x != null))),
    gap_p50_before_ms: round(quantile(per.map((p) => p.gap_p50_before_ms).filter((x) => x != null), 0.5)),
    bg_tps_during: windowS > 0 ? round(per.reduce((s, p) => s + p.tokens_during, 0) / windowS, 2) : null,
    bg_alive_at_end: aliveAtEnd, errors: [sb, ...bg.map((h) => streamSummary(h.r))].filter((p) => p.error).length,
    rss_hwm_mib: peakRssMiB(a.serverPid), streams: per, big: sb,
  };
}

// ---------- markdown ----------
const f = (x, d = 1) => (x == null ? "–" : Number(x).toFixed(d));
const ratio = (x, y) => (x != null && y ? `${(x / y).toFixed(2)}×` : "–");

// Lines of the same (engine, scenario, key) over repetitions: the mean of each number.
function group(lines, keyOf) {
  const m = new Map();
  for (const l of lines) {
    const k = keyOf(l);
    if (!m.has(k)) m.set(k, []);
    m.get(k).push(l);
  }
  return [...m.values()].map((ls) => {
    const out = { ...ls[0], reps: ls.length };
    for (const key of Object.keys(out)) {
      const vals = ls.map((l) => l[key]);
      if (vals.every((v) => typeof v === "number")) out[key] = mean(vals);
    }
    out.reps = ls.length;
    return out;
  });
}

function markdown(lines, np) {
  const out = [];
  const conc = group(lines.filter((l) => l.scenario === "conc"), (l) => `${l.engine}|${l.prompt_target}|${l.k}`);
  const engines = [...new Set(lines.filter((l) => l.engine && l.scenario !== "bench").map((l) => l.engine))];
  if (conc.length) {
    out.push("### Concurrent streams (POST /v1/completions, streaming, greedy)", "",
      "agg = generated tokens / (first first token → last token); total = generated tokens / (first send → last token); " +
      "stream = one stream's (chunks − 1) / (its first → last chunk), median over streams.", "",
      "| engine | prompt tok | streams | tokens | agg tok/s | total tok/s | stream tok/s p50 | TTFT p50 / max ms | gap p50 / max ms | peak RSS MiB | reps |",
      "|---|---|---|---|---|---|---|---|---|---|---|");
    for (const l of conc.sort((p, q) => p.engine.localeCompare(q.engine) || p.prompt_target - q.prompt_target || p.k - q.k))
      out.push(`| ${l.engine} | ${f(l.prompt_tokens, 0)} | ${l.k} | ${f(l.tokens_total, 0)} | ${f(l.agg_tps)} | ${f(l.total_tps)} | ` +
        `${f(l.stream_tps_p50)} | ${f(l.ttft_ms_p50, 0)} / ${f(l.ttft_ms_max, 0)} | ${f(l.gap_ms_p50)} / ${f(l.gap_ms_max)} | ` +
        `${f(l.rss_hwm_mib, 0)} | ${l.reps}${l.errors ? ` (${l.errors} errors)` : ""}${l.short_streams ? ` (${l.short_streams} short)` : ""} |`);
    out.push("");
  }
  const ttft = group(lines.filter((l) => l.scenario === "ttft"), (l) => l.engine);
  if (ttft.length) {
    out.push("### TTFT under load (a probe request arrives while other streams decode)", "",
      "| engine | load streams | probe prompt tok | TTFT idle ms | TTFT under load ms | ratio | probe gap p50 idle / load ms | load alive at send / end |",
      "|---|---|---|---|---|---|---|---|");
    for (const l of ttft)
      out.push(`| ${l.engine} | ${l.load_streams} | ${f(l.probe_prompt_tokens, 0)} | ${f(l.ttft_idle_ms, 0)} | ${f(l.ttft_load_ms, 0)} | ` +
        `${ratio(l.ttft_load_ms, l.ttft_idle_ms)} | ${f(l.probe_gap_p50_idle_ms)} / ${f(l.probe_gap_p50_load_ms)} | ` +
        `${f(l.load_alive_at_send, 0)} / ${f(l.load_alive_at_end, 0)} |`);
    out.push("");
  }
  const stall = group(lines.filter((l) => l.scenario === "stall"), (l) => l.engine);
  if (stall.length) {
    out.push("### Stall (a long prompt arrives while other streams decode)", "",
      "| engine | decoding streams | long prompt tok | its TTFT ms | max gap of the others during its ingestion ms | their gap p50 before ms | their tok/s during |",
      "|---|---|---|---|---|---|---|");
    for (const l of stall)
      out.push(`| ${l.engine} | ${l.stall_streams} | ${f(l.stall_prompt_tokens, 0)} | ${f(l.big_ttft_ms, 0)} | ${f(l.gap_max_during_ms, 0)} | ` +
        `${f(l.gap_p50_before_ms)} | ${f(l.bg_tps_during)} |`);
    out.push("");
  }
  // Ratios, side by side.
  const get = (e, p, k) => conc.find((l) => l.engine === e && l.prompt_target === p && l.k === k);
  const prompts = [...new Set(conc.map((l) => l.prompt_target))].sort((p, q) => p - q);
  const ws = engines.find((e) => e.startsWith("warmstart")) ?? engines[0];
  const peer = engines.find((e) => e !== ws);
  const tg = group(lines.filter((l) => l.scenario === "bench"), () => "x")[0];
  const rows = [];
  for (const p of prompts) {
    for (const e of engines) {
      const one = get(e, p, 1), many = get(e, p, np);
      rows.push([`${e}: ${np}-stream agg / 1-stream agg (prompt ${p})`, one && many ? ratio(many.agg_tps, one.agg_tps) : "–",
        one && many ? `${f(many.agg_tps)} / ${f(one.agg_tps)}` : ""]);
    }
    if (peer) {
      const w = get(ws, p, np), q = get(peer, p, np);
      rows.push([`${ws} / ${peer}, ${np}-stream agg (prompt ${p})`, w && q ? ratio(w.agg_tps, q.agg_tps) : "–",
        w && q ? `${f(w.agg_tps)} / ${f(q.agg_tps)}` : ""]);
    }
  }
  if (tg) {
    const one = get(ws, prompts[0], 1);
    rows.push([`${ws}: single-stream server decode / bench tg${tg.n_gen} (prompt ${prompts[0]})`,
      one ? ratio(one.stream_tps_p50, tg.tps) : "–", one ? `${f(one.stream_tps_p50)} / ${f(tg.tps)}` : ""]);
  }
  for (const l of ttft) rows.push([`${l.engine}: TTFT under load / idle`, ratio(l.ttft_load_ms, l.ttft_idle_ms),
    `${f(l.ttft_load_ms, 0)} / ${f(l.ttft_idle_ms, 0)} ms`]);
  for (const l of stall) rows.push([`${l.engine}: others' max gap during a ${f(l.stall_prompt_tokens, 0)}-token ingestion / their p50 gap`,
    ratio(l.gap_max_during_ms, l.gap_p50_before_ms), `${f(l.gap_max_during_ms, 0)} / ${f(l.gap_p50_before_ms)} ms`]);
  if (rows.length) {
    out.push("### Ratios", "", "| comparison | ratio | values |", "|---|---|---|", ...rows.map((r) => `| ${r.join(" | ")} |`), "");
  }
  return out.join("\n");
}

// ---------- main ----------
const a = parseArgs(process.argv.slice(2));
if (a.summarize.length) {
  const lines = a.summarize.flatMap((file) => fs.readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)));
  process.stdout.write(markdown(lines, a.np) + "\n");
  process.exit(0);
}

await calibrate(a.url);
const lines = [];
const emit = (rec) => {
  const line = { engine: a.engine, rep: a.rep, time: new Date().toISOString(), ...rec };
  lines.push(line);
  const s = JSON.stringify(line);
  if (a.jsonl) fs.appendFileSync(a.jsonl, s + "\n");
  process.stdout.write(s + "\n");
};
console.error(`batch_bench: ${a.engine} at ${a.url}: ${round(tokensPerWord, 2)} tokens per prompt word`);
if (a.scenarios.includes("conc"))
  for (const p of a.prompts)
    for (const k of a.concurrency) {
      const rec = await runConc(a, k, p);
      console.error(`batch_bench: ${a.engine} conc prompt ${rec.prompt_tokens} x ${k}: agg ${rec.agg_tps} tok/s, ` +
        `TTFT p50 ${rec.ttft_ms_p50} ms, gap max ${rec.gap_ms_max} ms${rec.errors ? `, ${rec.errors} errors` : ""}`);
      emit(rec);
    }
if (a.scenarios.includes("ttft")) {
  const rec = await runTtft(a);
  console.error(`batch_bench: ${a.engine} ttft: idle ${rec.ttft_idle_ms} ms, under load ${rec.ttft_load_ms} ms`);
  emit(rec);
}
if (a.scenarios.includes("stall")) {
  const rec = await runStall(a);
  console.error(`batch_bench: ${a.engine} stall: ${rec.stall_prompt_tokens}-token prompt, TTFT ${rec.big_ttft_ms} ms, ` +
    `others' max gap ${rec.gap_max_during_ms} ms`);
  emit(rec);
}
if (a.md) fs.writeFileSync(a.md, markdown(lines, a.np) + "\n");
else console.error("\n" + markdown(lines, a.np));
