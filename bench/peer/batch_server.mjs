// The concurrency peer: a minimal raw-prompt completions server on llama.cpp
// (node-llama-cpp@3.21.1, CPU only) serving N requests at once the way llama-server -np N does,
// so bench/batch_bench.mjs can time it exactly as it times `warmstart serve --parallel N`.
// Never run in CI.
//
//   node batch_server.mjs -m MODEL.gguf [-t THREADS] [-c CTX_PER_SEQUENCE] [-np N] [--port 0]
//
// One llama.cpp context with N sequences. A request takes a free sequence (or waits, FIFO,
// for one), clears it (see admit()), and evaluates its prompt and then its tokens on it. node-llama-cpp
// batches the pending evaluations of all the context's sequences into one llama_decode per
// step ("nextCycle" dispatch, "maximumParallelism": each sequence gets a share of the
// 512-token batch), so decoding streams and an ingesting prompt share every batch, as
// llama-server's continuous batching does.
//
// -c is the context of ONE sequence (node-llama-cpp allocates c x N cells in all), like
// warmstart's per-slot -c. llama-server's -c is the total, split between its slots:
// `llama-server -c 4096 -np 8` gives each slot 512; the equivalent here is `-c 512 -np 8`.
//
// Routes: GET /health, GET /v1/models, GET /slots (is_processing only), POST /tokenize
// ({content} -> {tokens}, as llama-server), POST /v1/completions (prompt: a string;
// max_tokens (or n_predict); stream with stream_options.include_usage; greedy whatever
// temperature says; ignore_eos as llama-server takes it: every end-of-generation token banned, so exactly max_tokens come
// back unless the context fills). No prefix cache across requests: each request starts its
// sequence empty. Streaming sends a chunk per generated token whose text is complete (a token
// ending inside a multi-byte character waits for the next, as warmstart does), then the finish
// chunk with llama-server's timings.
import { getLlama, LlamaLogLevel, TokenBias } from "node-llama-cpp";
import http from "node:http";
import path from "node:path";

function parseArgs(argv) {
  const a = { model: "", threads: 2, ctx: 4096, np: 1, port: 8080 };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i], v = argv[i + 1];
    if (k === "-m") (a.model = v), ++i;
    else if (k === "-t") (a.threads = Number(v)), ++i;
    else if (k === "-c") (a.ctx = Number(v)), ++i;
    else if (k === "-np" || k === "--parallel") (a.np = Number(v)), ++i;
    else if (k === "--port") (a.port = Number(v)), ++i;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.model) throw new Error("usage: node batch_server.mjs -m MODEL.gguf [-t T] [-c CTX_PER_SEQ] [-np N] [--port P]");
  return a;
}

class HttpError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

const a = parseArgs(process.argv.slice(2));
const llama = await getLlama({ gpu: false, build: "never", maxThreads: a.threads, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0 });
const context = await model.createContext({ contextSize: a.ctx, sequences: a.np, batchSize: 512, threads: a.threads });
const modelId = path.basename(a.model);

// ignore_eos: a bias of "never" on every end-of-generation token of the vocabulary.
const nVocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length ?? 0;
const eog = [];
for (let t = 0; t < nVocab; ++t) if (model.isEogToken(t)) eog.push(t);
for (const t of [model.tokens.eos, model.tokens.eot]) if (t != null && !eog.includes(t)) eog.push(t);
const noEog = new TokenBias(model.tokenizer);
for (const t of eog) noEog.set(t, "never");

// The sequence pool: a free sequence, or a place in the FIFO queue of waiters.
const free = Array.from({ length: a.np }, () => context.getSequence());
const waiters = [];
const acquire = () => (free.length ? Promise.resolve(free.pop()) : new Promise((r) => waiters.push(r)));
const release = (seq) => (waiters.length ? waiters.shift()(seq) : free.push(seq));

// Admission between decode steps. node-llama-cpp's dispatcher holds the context lock for as
// long as any evaluation is queued, and erasing a sequence (clearHistory) needs that lock, so
// a request arriving while others generate would wait until they have all finished. While a
// request clears its sequence, the generating requests hold back their next token (the
// gate), the dispatcher runs dry and lets the erase in: llama-server likewise sets up a new
// slot between two batches. (A prompt being ingested is not held back: a request arriving
// then is admitted once that prompt is in.)
let gate = null, openGate = null, admitting = 0;
async function admit(seq) {
  if (seq.nextTokenIndex === 0) return;
  if (admitting++ === 0) gate = new Promise((r) => (openGate = r));
  try {
    await seq.clearHistory();
  } finally {
    if (--admitting === 0) (gate = null), openGate();
  }
}

function promptTokens(body) {
  let p = body.prompt;
  if (Array.isArray(p) && p.length === 1 && typeof p[0] === "string") p = p[0];
  if (typeof p !== "string" || p.length === 0) throw new HttpError(400, "'prompt' must be a non-empty string");
  const tokens = model.tokenize(p, true);
  if (model.tokens.bos != null && model.tokens.shouldPrependBosToken) tokens.unshift(model.tokens.bos);
  return tokens;
}

// One completion on a leased sequence. onToken(text) per token that completes text; isGone()
// stops early when the client has left.
async function complete(body, onToken, isGone) {
  const tokens = promptTokens(body);
  const room = context.contextSize - tokens.length;
  if (room < 1) throw new HttpError(400, `prompt of ${tokens.length} tokens does not fit the context of ${context.contextSize}`);
  const asked = body.max_tokens ?? (body.n_predict > 0 ? body.n_predict : undefined) ?? room;
  const maxTokens = Math.max(1, Math.min(room, asked));
  const t0 = performance.now();
  const seq = await acquire();
  const tLease = performance.now();
  let promptMs = null, tFirst = null;
  const gen = [];
  let sent = "";
  try {
    await admit(seq);
    const opts = { temperature: 0, ...(body.ignore_eos ? { tokenBias: noEog } : {}) };
    for await (const token of seq.evaluate(tokens, opts)) {
      if (promptMs === null) (tFirst = performance.now()), (promptMs = tFirst - tLease);
      gen.push(token);
      // Hold back a trailing U+FFFD: a multi-byte character may be split across tokens.
      const text = model.detokenize(gen);
      if (!text.endsWith("\uFFFD") && text.length > sent.length) onToken(text.slice(sent.length)), (sent = text);
      if (gen.length >= maxTokens || isGone()) break;
      if (gate) await gate;  // a request is being admitted: no next token until it is in
    }
  } finally {
    release(seq);
  }
  const tEnd = performance.now();
  if (promptMs === null) (tFirst = tEnd), (promptMs = tEnd - tLease);
  const text = model.detokenize(gen);
  return {
    text, tail: text.slice(sent.length), finish_reason: gen.length >= maxTokens ? "length" : "stop",
    usage: { prompt_tokens: tokens.length, completion_tokens: gen.length, total_tokens: tokens.length + gen.length },
    timings: { prompt_n: tokens.length, prompt_ms: promptMs, predicted_n: gen.length, predicted_ms: tEnd - tFirst,
      queue_ms: tLease - t0 },
  };
}

const sendJson = (res, status, obj) => res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(obj));

async function readJson(req) {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  try { return JSON.parse(raw); } catch { throw new HttpError(400, "invalid JSON body"); }
}

async function completions(req, res) {
  const body = await readJson(req);
  const base = { id: `cmpl-${Date.now()}`, object: "text_completion", created: Math.floor(Date.now() / 1000), model: modelId };
  let gone = false;
  res.on("close", () => { if (!res.writableFinished) gone = true; });
  if (!body.stream) {
    const r = await complete(body, () => {}, () => gone);
    return sendJson(res, 200, { ...base, usage: r.usage, timings: r.timings,
      choices: [{ index: 0, text: r.text, logprobs: null, finish_reason: r.finish_reason }] });
  }
  promptTokens(body);  // a bad prompt is a 400, not a broken stream
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  const event = (choices, extra = {}) => res.write(`data: ${JSON.stringify({ ...base, choices, ...extra })}\n\n`);
  try {
    const r = await complete(body, (t) => event([{ index: 0, text: t, logprobs: null, finish_reason: null }]), () => gone);
    if (gone) return res.end();
    event([{ index: 0, text: r.tail, logprobs: null, finish_reason: r.finish_reason }], { timings: r.timings });
    if (body.stream_options?.include_usage) event([], { usage: r.usage, timings: r.timings });
  } catch (e) {
    res.write(`data: ${JSON.stringify({ error: { message: String(e?.message ?? e) } })}\n\n`);
  }
  res.end("data: [DONE]\n\n");
}

const server = http.createServer(async (req, res) => {
  const url = req.url.split("?")[0];
  try {
    if (req.method === "GET" && (url === "/health" || url === "/v1/health")) return sendJson(res, 200, { status: "ok" });
    if (req.method === "GET" && url === "/v1/models")
      return sendJson(res, 200, { object: "list", data: [{ id: modelId, object: "model", owned_by: "node-llama-cpp" }] });
    if (req.method === "GET" && url === "/slots")  // llama-server's shape, only what the bench reads
      return sendJson(res, 200, Array.from({ length: a.np }, (_, id) => ({ id, is_processing: id >= free.length })));
    if (req.method === "POST" && url === "/tokenize") {
      const body = await readJson(req);
      return sendJson(res, 200, { tokens: Array.from(model.tokenize(String(body.content ?? ""), true)) });
    }
    if (req.method === "POST" && (url === "/v1/completions" || url === "/completions")) return await completions(req, res);
    sendJson(res, 404, { error: { message: "not found" } });
  } catch (e) {
    if (!res.headersSent) sendJson(res, e.status ?? 500, { error: { message: String(e?.message ?? e) } });
    else res.end();
  }
});
server.listen(a.port, "127.0.0.1", () => {
  console.error(`node-llama-cpp batch server: listening on http://127.0.0.1:${server.address().port} ` +
    `(model ${modelId}, ${a.np} sequences x context ${context.contextSize}, ${a.threads} threads, ${eog.length} EOG tokens)`);
});
const stop = () => {
  server.close();
  server.closeAllConnections?.();
  context.dispose().then(() => model.dispose()).then(() => llama.dispose()).finally(() => process.exit(0));
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
