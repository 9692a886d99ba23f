// The speed peer: llama.cpp's CPU kernels through node-llama-cpp (pinned 3.21.1), measured
// the way `warmstart bench` measures itself. Never run in CI.
//
//   node bench.mjs -m MODEL.gguf [-p 512,2048] [-n 128] [-d DEPTH] [-t THREADS] [-r REPS]
//                  [--chat-turns 12] [--fa] [--json]
//
// pp N: N fixed pseudo-random token ids evaluated into an empty sequence (batch 512).
// tg M: M single-token evaluations (greedy, EOG tokens allowed) into an empty sequence.
// --fa: flash attention on (llama-server's default, "auto", turns it on for the CPU;
// node-llama-cpp's default is off).
// -d D: each test starts from a sequence that already holds D tokens, evaluated untimed
// (llama-bench's depth, and `warmstart bench -d`).
// chat: a LlamaChatSession of T turns; each turn resends the whole conversation (the
// session reuses its KV prefix, as llama.cpp's server does); TTFT summed over turns.
// Output (--json): a list of {n_prompt, n_gen, avg_ts, stddev_ts, ...} like llama-bench,
// plus one {test: "chat", turns, ttft_sum_ms, ...} object when --chat-turns > 0.
import { getLlama, LlamaChatSession, LlamaLogLevel } from "node-llama-cpp";
import os from "node:os";
import path from "node:path";

function parseArgs(argv) {
  const a = { model: "", pp: [512], tg: 128, depth: 0, threads: 2, reps: 3, chatTurns: 0, json: false, ctx: 0, fa: false };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i], v = argv[i + 1];
    if (k === "-m") (a.model = v), ++i;
    else if (k === "-p") (a.pp = v.split(",").filter(Boolean).map(Number).filter((x) => x > 0)), ++i;
    else if (k === "-n") (a.tg = Number(v)), ++i;
    else if (k === "-d") (a.depth = Number(v)), ++i;
    else if (k === "-t") (a.threads = Number(v)), ++i;
    else if (k === "-r") (a.reps = Number(v)), ++i;
    else if (k === "--chat-turns") (a.chatTurns = Number(v)), ++i;
    else if (k === "--ctx") (a.ctx = Number(v)), ++i;
    else if (k === "--json") a.json = true;
    else if (k === "--fa") a.fa = true;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.model) throw new Error("usage: node bench.mjs -m MODEL.gguf [-p 512,2048] [-n 128] [-t T] [-r R] [--json]");
  return a;
}

// The same token ids as warmstart's bench: an LCG over ids below min(8000, n_vocab).
function promptTokens(n, nVocab) {
  const limit = BigInt(Math.min(8000, nVocab));
  let x = 12345n;
  const out = [];
  for (let i = 0; i < n; ++i) {
    x = (x * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
    out.push(Number((x >> 33n) % limit));
  }
  return out;
}

const stats = (xs) => {
  const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
  const sd = xs.length > 1 ? Math.sqrt(xs.reduce((s, x) => s + (x - mean) ** 2, 0) / (xs.length - 1)) : 0;
  return [mean, sd];
};

// The depth tokens are evaluated untimed first (none when depth is empty).
async function timePrompt(seq, depth, tokens) {
  await seq.clearHistory();
  if (depth.length) await seq.evaluateWithoutGeneratingNewTokens(depth);
  const t0 = process.hrtime.bigint();
  await seq.evaluateWithoutGeneratingNewTokens(tokens);
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

async function timeGen(seq, depth, nGen, firstToken) {
  await seq.clearHistory();
  if (depth.length) await seq.evaluateWithoutGeneratingNewTokens(depth);
  const t0 = process.hrtime.bigint();
  let n = 0;
  for await (const _ of seq.evaluate([firstToken], { temperature: 0, yieldEogToken: true })) {
    if (++n >= nGen) break;
  }
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

// A multi-turn chat; each user turn is ~`words` words. Returns per-turn TTFT in ms.
async function chatTurns(context, turns, words) {
  const seq = context.getSequence();
  const session = new LlamaChatSession({ contextSequence: seq });
  const vocab = "alpha beta gamma delta river stone cloud light paper window garden music number green".split(" ");
  const ttft = [];
  let r = 7;
  for (let t = 0; t < turns; ++t) {
    const text = Array.from({ length: words }, () => vocab[(r = (r * 1103515245 + 12345) % 2147483648) % vocab.length]).join(" ");
    const t0 = process.hrtime.bigint();
    let first = 0;
    await session.prompt(text, {
      maxTokens: 32, temperature: 0,
      onToken: () => { if (!first) first = Number(process.hrtime.bigint() - t0) / 1e6; },
    });
    ttft.push(first);
  }
  seq.dispose();
  return ttft;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: a.threads, logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0 });
  const maxPrompt = Math.max(0, ...a.pp);
  const contextSize = a.ctx || Math.max(4096, a.depth + maxPrompt + a.tg + 16);
  const context = await model.createContext({ contextSize, batchSize: 512, threads: a.threads, sequences: 1,
    flashAttention: a.fa });
  const nVocab = model.tokens.bos !== undefined ? model.fileInsights.vocabularySize ?? 8000 : 8000;
  const seq = context.getSequence();
  const common = { model_filename: path.basename(a.model), model_type: model.typeDescription, n_threads: a.threads,
    n_batch: 512, n_ubatch: 512, backends: "CPU", flash_attn: a.fa, build: "node-llama-cpp@3.21.1", cpu_info: os.cpus()[0]?.model ?? "",
    test_time: new Date().toISOString() };
  const results = [];
  const emit = (r) => {
    results.push(r);
    if (!a.json) console.log(`${r.test ?? (r.n_prompt ? "pp" + r.n_prompt : "tg" + r.n_gen)}\t${(r.avg_ts ?? 0).toFixed(2)} ± ${(r.stddev_ts ?? 0).toFixed(2)} t/s${r.ttft_sum_ms ? "  ttft_sum " + r.ttft_sum_ms.toFixed(0) + " ms" : ""}`);
  };
  // The same split as warmstart's bench: depth tokens first, then the test's own.
  const toks = promptTokens(a.depth + Math.max(maxPrompt, 1), nVocab);
  const depth = toks.slice(0, a.depth), rest = toks.slice(a.depth);
  common.n_depth = a.depth;
  for (const n of a.pp) {
    const p = rest.slice(0, n);
    await timePrompt(seq, [], p.slice(0, Math.min(n, 32)));  // warm-up
    const secs = [];
    for (let r = 0; r < a.reps; ++r) secs.push(await timePrompt(seq, depth, p));
    const [avg, sd] = stats(secs.map((s) => n / s));
    emit({ ...common, n_prompt: n, n_gen: 0, avg_ns: Math.round(stats(secs)[0] * 1e9), avg_ts: avg, stddev_ts: sd, samples_ts: secs.map((s) => n / s) });
  }
  if (a.tg > 0) {
    await timeGen(seq, [], 4, rest[0]);  // warm-up
    const secs = [];
    for (let r = 0; r < a.reps; ++r) secs.push(await timeGen(seq, depth, a.tg, rest[0]));
    const [avg, sd] = stats(secs.map((s) => a.tg / s));
    emit({ ...common, n_prompt: 0, n_gen: a.tg, avg_ns: Math.round(stats(secs)[0] * 1e9), avg_ts: avg, stddev_ts: sd, samples_ts: secs.map((s) => a.tg / s) });
  }
  seq.dispose();
  if (a.chatTurns > 0) {
    const ttft = await chatTurns(context, a.chatTurns, 120);
    emit({ ...common, test: "chat", turns: a.chatTurns, ttft_ms: ttft, ttft_sum_ms: ttft.reduce((s, x) => s + x, 0) });
  }
  if (a.json) console.log(JSON.stringify(results, null, 2));
  await context.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  console.error(e?.stack ?? String(e));
  process.exit(1);
});
