// The multi-turn peer: a minimal OpenAI-compatible server on llama.cpp (node-llama-cpp@3.21.1,
// CPU only) so ../shared/tools/turnbench.py can time it exactly as it times `warmstart serve`.
// Never run in CI.
//
//   node server.mjs -m MODEL.gguf [-t THREADS] [-c CTX] [--port 0]
//
// It behaves like llama.cpp's server with one slot (--parallel 1, --cache-prompt on): the
// messages are rendered with the model's own Jinja chat template (ChatML when it has none,
// as warmstart does), tokenized with special tokens parsed, and evaluated on ONE persistent
// context sequence after erasing it back to the longest common token prefix with the
// previous request. Recurrent, hybrid and SWA models cannot erase part of their state; for
// them, as llama.cpp's server does (--ctx-checkpoints), the state is checkpointed 64 tokens
// before the end of each prompt and the sequence rolls back to the last checkpoint before
// the divergence, recomputing the rest (node-llama-cpp keeps 32 checkpoints, as llama.cpp).
// Not mirrored: llama.cpp's RAM prompt cache (--cache-ram), which keeps the states of other
// conversations; here a switch of conversation keeps only the common prefix.
// Requests are served one at a time; greedy sampling; no grammar, logprobs or tools.
import { getLlama, JinjaTemplateChatWrapper, LlamaLogLevel } from "node-llama-cpp";
import http from "node:http";
import path from "node:path";

// warmstart's fallback for models without a template (src/chat/chat_prompt.cpp, render_chatml).
const CHATML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + " +
  "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

function parseArgs(argv) {
  const a = { model: "", threads: 2, ctx: 8192, port: 8080 };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i], v = argv[i + 1];
    if (k === "-m") (a.model = v), ++i;
    else if (k === "-t") (a.threads = Number(v)), ++i;
    else if (k === "-c") (a.ctx = Number(v)), ++i;
    else if (k === "--port") (a.port = Number(v)), ++i;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.model) throw new Error("usage: node server.mjs -m MODEL.gguf [-t T] [-c CTX] [--port P]");
  return a;
}

const a = parseArgs(process.argv.slice(2));
const llama = await getLlama({ gpu: false, build: "never", maxThreads: a.threads, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0 });
const context = await model.createContext({ contextSize: a.ctx, batchSize: 512, threads: a.threads, sequences: 1 });
const seq = context.getSequence();
const modelId = path.basename(a.model);
const template = new JinjaTemplateChatWrapper({
  template: model.fileInfo.metadata?.tokenizer?.chat_template ?? CHATML,
  trimLeadingWhitespaceInResponses: false,  // render past replies verbatim, as a Jinja renderer does
});

const ROLES = { system: "system", developer: "system", user: "user", assistant: "model" };
const textOf = (c) => (typeof c === "string" ? c : Array.isArray(c) ? c.map((p) => p?.text ?? "").join("") : "");

function promptTokens(messages) {
  if (!Array.isArray(messages) || messages.length === 0) throw new HttpError(400, "'messages' must be a non-empty array");
  const chatHistory = messages.map((m) => {
    const type = ROLES[m?.role];
    if (!type) throw new HttpError(400, `unsupported role ${JSON.stringify(m?.role)}`);
    return type === "model" ? { type, response: [textOf(m.content)] } : { type, text: textOf(m.content) };
  });
  chatHistory.push({ type: "model", response: [] });  // add_generation_prompt
  const { contextText } = template.generateContextState({ chatHistory });
  return model.tokenize(contextText.toString(), true);
}

class HttpError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// One completion on the shared sequence. onText gets each printable piece as it is decoded.
async function complete(body, onText) {
  const tokens = promptTokens(body.messages);
  const room = context.contextSize - tokens.length;
  if (room < 1) throw new HttpError(400, `prompt of ${tokens.length} tokens does not fit the context`);
  const maxTokens = Math.max(1, Math.min(room, body.max_tokens ?? body.max_completion_tokens ?? room));
  const meter = () => seq.tokenMeter.usedInputTokens + seq.tokenMeter.usedOutputTokens;
  const t0 = performance.now(), m0 = meter();
  // Keep the common prefix; at least the last prompt token is evaluated, for its logits.
  if (tokens.length === 1 && seq.nextTokenIndex > 0) await seq.clearHistory();
  else await seq.adaptStateToTokens(tokens.slice(0, -1), false);
  // llama.cpp's server stops 64 tokens short of the end to checkpoint there, so that a prompt
  // diverging near its predecessor's end (a resent one, a re-tokenized reply) rolls back there.
  const split = Math.max(seq.nextTokenIndex, tokens.length - 64);
  if (seq.needsCheckpoints && split > 64) {
    await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(seq.nextTokenIndex, split));
    await seq.takeCheckpoint();
  }
  const gen = [];
  let sent = "", promptMs = null, computed = 0;
  // Recomputed tokens include those replayed after a checkpoint restore, so cached is honest.
  const promptDone = () => { computed = meter() - m0; promptMs = performance.now() - t0; };
  for await (const token of seq.evaluate(tokens.slice(seq.nextTokenIndex), { temperature: 0 })) {
    if (promptMs === null) promptDone();
    gen.push(token);
    // Hold back a trailing U+FFFD: a multi-byte character may be split across tokens.
    const text = model.detokenize(gen);
    if (!text.endsWith("\uFFFD") && text.length > sent.length) onText(text.slice(sent.length)), (sent = text);
    if (gen.length >= maxTokens) break;
  }
  if (promptMs === null) promptDone();  // the first token was end-of-generation
  const text = model.detokenize(gen);
  if (text.length > sent.length) onText(text.slice(sent.length));
  const totalMs = performance.now() - t0, cached = tokens.length - computed;
  return {
    text, finish_reason: gen.length >= maxTokens ? "length" : "stop",
    usage: { prompt_tokens: tokens.length, completion_tokens: gen.length, total_tokens: tokens.length + gen.length,
      prompt_tokens_details: { cached_tokens: cached } },
    timings: { prompt_n: computed, prompt_ms: promptMs, cache_n: cached, predicted_n: gen.length,
      predicted_ms: totalMs - promptMs },
  };
}

const sendJson = (res, status, obj) => res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(obj));

async function chatCompletions(req, res) {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  let body;
  try { body = JSON.parse(raw); } catch { throw new HttpError(400, "invalid JSON body"); }
  const base = { id: `chatcmpl-${Date.now()}`, created: Math.floor(Date.now() / 1000), model: modelId };
  if (!body.stream) {
    const r = await complete(body, () => {});
    return sendJson(res, 200, { ...base, object: "chat.completion", usage: r.usage, timings: r.timings,
      choices: [{ index: 0, message: { role: "assistant", content: r.text }, finish_reason: r.finish_reason }] });
  }
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  const event = (choices, extra = {}) =>
    res.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices, ...extra })}\n\n`);
  try {
    event([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }]);
    const r = await complete(body, (t) => event([{ index: 0, delta: { content: t }, finish_reason: null }]));
    event([{ index: 0, delta: {}, finish_reason: r.finish_reason }], { timings: r.timings });
    if (body.stream_options?.include_usage) event([], { usage: r.usage, timings: r.timings });
  } catch (e) {
    res.write(`data: ${JSON.stringify({ error: { message: String(e?.message ?? e) } })}\n\n`);
  }
  res.end("data: [DONE]\n\n");
}

let queue = Promise.resolve();  // one request at a time on the one sequence
const server = http.createServer((req, res) => {
  const url = req.url.split("?")[0];
  if (req.method === "GET" && url === "/health") return sendJson(res, 200, { status: "ok" });
  if (req.method === "GET" && url === "/v1/models")
    return sendJson(res, 200, { object: "list", data: [{ id: modelId, object: "model", owned_by: "node-llama-cpp" }] });
  if (req.method !== "POST" || url !== "/v1/chat/completions") return sendJson(res, 404, { error: { message: "not found" } });
  queue = queue.then(() => chatCompletions(req, res)).catch((e) => {
    if (!res.headersSent) sendJson(res, e.status ?? 500, { error: { message: String(e?.message ?? e) } });
    else res.end();
  });
});
server.listen(a.port, "127.0.0.1", () => {
  console.error(`node-llama-cpp server: listening on http://127.0.0.1:${server.address().port} ` +
    `(model ${modelId}, ${a.threads} threads, context ${a.ctx})`);
});
const stop = () => server.close(async () => { await context.dispose(); await model.dispose(); await llama.dispose(); process.exit(0); });
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
