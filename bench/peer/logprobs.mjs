// llama.cpp's next-token log-probabilities through node-llama-cpp (pinned 3.21.1), for
// comparing warmstart's logits with the same KV cache types (bench/kv_types_check.sh).
// Never run in CI.
//
//   node logprobs.mjs -m MODEL.gguf --tokens 1,2,3 [-ctk f16] [-ctv f16] [--fa on|off] [-t 2]
//
// Prints JSON: {tokens, nll: [n-1], argmax: [n-1], top8: [n-1][8] of [id, log p]} for the
// positions 0 .. n-2 (the prediction of token i + 1), one batch, one sequence. llama.cpp
// stores a quantized V cache only with flash attention, so --fa defaults to on.
import { getLlama, LlamaLogLevel, GgmlType } from "node-llama-cpp";

function parseArgs(argv) {
  const a = { model: "", tokens: [], ctk: "F16", ctv: "F16", fa: true, threads: 2 };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i], v = argv[i + 1];
    if (k === "-m") (a.model = v), ++i;
    else if (k === "--tokens") (a.tokens = v.split(",").filter(Boolean).map(Number)), ++i;
    else if (k === "-ctk") (a.ctk = v.toUpperCase()), ++i;
    else if (k === "-ctv") (a.ctv = v.toUpperCase()), ++i;
    else if (k === "--fa") (a.fa = v !== "off"), ++i;
    else if (k === "-t") (a.threads = Number(v)), ++i;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.model || a.tokens.length < 2) throw new Error("usage: node logprobs.mjs -m MODEL.gguf --tokens 1,2,3 [-ctk T] [-ctv T]");
  for (const t of [a.ctk, a.ctv]) if (!(t in GgmlType)) throw new Error(`unknown cache type ${t}`);
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: a.threads, logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0 });
  const context = await model.createContext({
    contextSize: Math.max(256, a.tokens.length + 16), batchSize: Math.max(512, a.tokens.length), threads: a.threads,
    sequences: 1, flashAttention: a.fa, experimentalKvCacheKeyType: a.ctk, experimentalKvCacheValueType: a.ctv,
  });
  const seq = context.getSequence();
  const sampling = { temperature: 1, topK: 0, topP: 1, minP: 0 };
  const input = a.tokens.map((t, i) => (i + 1 < a.tokens.length ? [t, { generateNext: { probabilities: true, options: sampling } }] : t));
  const out = await seq.controlledEvaluate(input);
  const nll = [], argmax = [], top8 = [];
  for (let i = 0; i + 1 < a.tokens.length; ++i) {
    const probs = out[i]?.next?.probabilities;
    if (!probs) throw new Error(`no probabilities at position ${i}`);
    const sorted = [...probs.entries()].sort((x, y) => y[1] - x[1]);
    const p = probs.get(a.tokens[i + 1]) ?? 0;
    nll.push(-Math.log(p));
    argmax.push(sorted[0][0]);
    top8.push(sorted.slice(0, 8).map(([id, q]) => [id, Math.log(q)]));
  }
  console.log(JSON.stringify({ tokens: a.tokens, ctk: a.ctk, ctv: a.ctv, flash_attn: a.fa, nll, argmax, top8 }));
  seq.dispose();
  await context.dispose();
  await model.dispose();
}

main().catch((e) => {
  console.error(e.message ?? e);
  process.exit(1);
});
