// Tool calls, json_schema, reasoning and embeddings through the official OpenAI Node client,
// and a 10-step agent loop through an agent framework (the Vercel AI SDK's generateText),
// on a fixture model served with a fixture chat template that has a tool-call syntax
// (picked from shared/fixtures/templates by what it contains, not by name). Forced calls
// (tool_choice "required" / named) come out of constrained sampling, so they are valid
// calls even from random weights.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { generateText, stepCountIs, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { z } from 'zod';

const API_KEY = 'e2e-key';
let baseURL;

function templates() {
  const dir = path.join(path.dirname(process.env.WS_MODEL), '..', 'templates');
  const manifest = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
  return manifest.templates.map((t) => ({ file: path.join(dir, t.file), src: readFileSync(path.join(dir, t.file), 'utf8') }));
}

// The first fixture template (manifest order) that writes Hermes-style JSON <tool_call>s and
// knows <think> blocks (a generation prompt that does not itself open one, so each prompt
// is a token prefix of the next and the loop below can reuse all of it).
function toolTemplate() {
  const t = templates().find(({ src }) => src.includes('<tool_call>') && src.includes('<think>') && !src.includes('<function='));
  if (!t) throw new Error('no fixture template with <tool_call> and <think>');
  return t.file;
}

// One that opens the thinking block in its generation prompt (Qwen 3.5 style: XML calls).
function thinkingTemplate() {
  const t = templates().find(({ src }) => src.includes('<function=') && src.includes('enable_thinking'));
  if (!t) throw new Error('no fixture template with <function= and enable_thinking');
  return t.file;
}

const servers = [];
function startServer(template, extra = []) {
  const { WS_BINARY, WS_MODEL } = process.env;
  if (!WS_BINARY || !WS_MODEL) throw new Error('set WS_BINARY and WS_MODEL');
  const server = spawn(WS_BINARY, ['serve', '-m', WS_MODEL, '--port', '0', '-t', '2', '--api-key', API_KEY,
    '--cache-budget-mb', '64', '-c', '8192', '--chat-template-file', template, ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
  servers.push(server);
  return new Promise((resolve, reject) => {
    let log = '';
    const timer = setTimeout(() => reject(new Error('server did not start:\n' + log)), 60_000);
    server.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    server.on('exit', (code) => reject(new Error(`server exited (${code}):\n${log}`)));
  });
}

let thinkingURL;
before(async () => {
  baseURL = await startServer(toolTemplate());
  thinkingURL = await startServer(thinkingTemplate(), ['--reasoning-format', 'deepseek']);
});
after(() => servers.forEach((s) => s.kill('SIGTERM')));

const client = () => new OpenAI({ apiKey: API_KEY, baseURL: baseURL + '/v1', maxRetries: 0 });

// Bounded strings and enums: a random-weight model must still finish a call.
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city.',
    parameters: { type: 'object', properties: {
      city: { type: 'string', maxLength: 12 }, days: { type: 'integer' },
      unit: { type: 'string', enum: ['c', 'f'] } }, required: ['city', 'unit'] } } },
  { type: 'function', function: { name: 'search_web', description: 'Search.',
    parameters: { type: 'object', properties: { query: { type: 'string', maxLength: 10 } }, required: ['query'] } } },
];

function checkCall(call, only) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_/);
  const fn = tools.find((t) => t.function.name === call.function.name);
  assert.ok(fn, `unknown tool ${call.function.name}`);
  if (only) assert.equal(call.function.name, only);
  const args = JSON.parse(call.function.arguments);
  for (const k of fn.function.parameters.required) assert.ok(k in args, `${k} missing from ${call.function.arguments}`);
  if ('unit' in args) assert.ok(['c', 'f'].includes(args.unit));
  if ('days' in args) assert.ok(Number.isInteger(args.days));
  for (const [k, v] of Object.entries(args))
    if (fn.function.parameters.properties[k].type === 'string') assert.equal(typeof v, 'string');
  return args;
}

test('tool_choice required: a valid call, finish_reason tool_calls, and the result goes back as a tool message', async () => {
  const messages = [{ role: 'user', content: 'Weather in Paris?' }];
  for (const seed of [1, 2, 3]) {
    const r = await client().chat.completions.create({ model: 'm', messages, tools, tool_choice: 'required', seed,
      max_tokens: 400 });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
    assert.equal(c.message.tool_calls.length, 1);
    checkCall(c.message.tool_calls[0]);
  }
  const named = await client().chat.completions.create({ model: 'm', messages, tools, max_tokens: 400,
    tool_choice: { type: 'function', function: { name: 'search_web' } } });
  const call = named.choices[0].message.tool_calls[0];
  checkCall(call, 'search_web');
  // The round trip: the call and its result rendered by the template, then a plain answer.
  const next = await client().chat.completions.create({ model: 'm', max_tokens: 8, tools, tool_choice: 'none',
    messages: [...messages, named.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"hits": 0}' }] });
  assert.equal(typeof next.choices[0].message.content, 'string');
  assert.equal(next.choices[0].message.tool_calls, undefined);
  assert.ok(next.usage.prompt_tokens_details.cached_tokens >= named.usage.prompt_tokens);
});

test('streamed tool calls arrive as delta.tool_calls and add up to the non-streamed call', async () => {
  const body = { model: 'm', messages: [{ role: 'user', content: 'Search for cats.' }], tools, tool_choice: 'required',
    temperature: 0, max_tokens: 400 };
  const whole = await client().chat.completions.create(body);
  const stream = await client().chat.completions.create({ ...body, stream: true });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.finish_reason) finish = c.finish_reason;
      for (const d of c.delta.tool_calls ?? []) {
        if (d.id) calls[d.index] = { id: d.id, name: d.function.name, arguments: d.function.arguments ?? '' };
        else calls[d.index].arguments += d.function.arguments;
      }
    }
  }
  assert.equal(finish, 'tool_calls');
  const want = whole.choices[0].message.tool_calls;
  assert.deepEqual(calls.map((c) => [c.name, c.arguments]), want.map((c) => [c.function.name, c.function.arguments]));
});

test('response_format json_schema: every reply validates', async () => {
  const schema = { type: 'object', properties: { answer: { type: 'string', enum: ['yes', 'no'] },
    n: { type: 'integer' } }, required: ['answer', 'n'] };
  for (const seed of [1, 2]) {
    const r = await client().chat.completions.create({ model: 'm', seed, max_tokens: 200,
      messages: [{ role: 'user', content: 'Yes or no?' }],
      response_format: { type: 'json_schema', json_schema: { name: 'a', schema } } });
    const v = JSON.parse(r.choices[0].message.content);
    assert.ok(['yes', 'no'].includes(v.answer));
    assert.ok(Number.isInteger(v.n));
  }
});

test('a 10-step tool loop reuses the whole previous prompt every step', async () => {
  const messages = [{ role: 'system', content: 'You are an agent.' }, { role: 'user', content: 'Plan a trip.' }];
  let previous = 0;
  for (let step = 0; step < 10; step++) {
    const r = await client().chat.completions.create({ model: 'm', messages, tools, tool_choice: 'required',
      seed: step, max_tokens: 400 });
    const msg = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    if (step > 0) assert.ok(r.usage.prompt_tokens_details.cached_tokens >= previous,
      `step ${step}: cached ${r.usage.prompt_tokens_details.cached_tokens} < previous prompt ${previous}`);
    previous = r.usage.prompt_tokens;
    messages.push(msg);
    for (const call of msg.tool_calls) {
      checkCall(call);
      messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify({ ok: true, step }) });
    }
  }
});

test('thinking: reasoning_content whole and streamed, chat_template_kwargs and reasoning_format', async () => {
  const c = new OpenAI({ apiKey: API_KEY, baseURL: thinkingURL + '/v1', maxRetries: 0 });
  const body = { model: 'm', messages: [{ role: 'user', content: 'Think.' }], max_tokens: 12, temperature: 0 };
  // The template opens <think> in its generation prompt, so the whole (unclosed) reply is thinking.
  const prompt = await fetch(thinkingURL + '/apply-template', { method: 'POST', headers: { 'X-Api-Key': API_KEY },
    body: JSON.stringify(body) }).then((r) => r.json());
  assert.match(prompt.prompt, /<think>\n$/);
  const whole = await c.chat.completions.create(body);
  const m = whole.choices[0].message;
  assert.ok(m.reasoning_content.length > 0, JSON.stringify(m));
  assert.equal(m.content, '');
  let reasoning = '', content = '';
  for await (const chunk of await c.chat.completions.create({ ...body, stream: true }))
    for (const ch of chunk.choices) {
      reasoning += ch.delta.reasoning_content ?? '';
      content += ch.delta.content ?? '';
    }
  assert.equal(reasoning, m.reasoning_content);
  assert.equal(content, '');
  // reasoning_format none: the same text stays in content.
  const raw = await c.chat.completions.create({ ...body, reasoning_format: 'none' });
  assert.equal(raw.choices[0].message.reasoning_content, undefined);
  assert.ok(raw.choices[0].message.content.includes(m.reasoning_content));
  // enable_thinking false reaches the template: the block is closed before the reply.
  const off = { ...body, chat_template_kwargs: { enable_thinking: false } };
  const offPrompt = await fetch(thinkingURL + '/apply-template', { method: 'POST', headers: { 'X-Api-Key': API_KEY },
    body: JSON.stringify(off) }).then((r) => r.json());
  assert.match(offPrompt.prompt, /<\/think>\s*$/);
  const plain = await c.chat.completions.create(off);
  assert.equal(plain.choices[0].message.reasoning_content, undefined);
  assert.ok(plain.choices[0].message.content.length > 0);
});

test('embeddings: normalised, deterministic, a batch item equals the same input alone, texts differ', async () => {
  const c = client();
  const batch = await c.embeddings.create({ model: 'm', input: ['the cat sat', 'the cat sat', 'a different text'] });
  assert.equal(batch.object, 'list');
  assert.deepEqual(batch.data.map((d) => d.index), [0, 1, 2]);
  assert.ok(batch.usage.prompt_tokens > 0);
  const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  for (const d of batch.data) assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5);
  assert.deepEqual(batch.data[0].embedding, batch.data[1].embedding);
  assert.notDeepEqual(batch.data[0].embedding, batch.data[2].embedding);
  // The client asks for base64 unless told; floats must decode to the same vector.
  const alone = await c.embeddings.create({ model: 'm', input: 'the cat sat', encoding_format: 'float' });
  assert.deepEqual(alone.data[0].embedding, batch.data[0].embedding);
  await assert.rejects(c.embeddings.create({ model: 'm', input: '' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'input');
});

test('agent framework (AI SDK generateText): 10 tool steps, each reusing the previous prompt', async () => {
  const provider = createOpenAICompatible({ name: 'warmstart', baseURL: baseURL + '/v1', apiKey: API_KEY,
    includeUsage: true });
  const seen = [];
  const result = await generateText({
    model: provider.chatModel('m'),
    system: 'You are an agent. Search until the plan is complete.',
    prompt: 'Plan a trip to Lisbon.',
    tools: {
      search_web: tool({
        description: 'Search the web.',
        inputSchema: z.object({ query: z.string().max(10) }),
        execute: async ({ query }) => {
          seen.push(query);
          return { hits: seen.length };
        },
      }),
    },
    toolChoice: 'required',
    stopWhen: stepCountIs(10),
    maxOutputTokens: 300,
    seed: 1,
  });
  assert.equal(result.steps.length, 10);
  assert.equal(seen.length, 10, 'every step called the tool (tool_choice required)');
  for (const [i, step] of result.steps.entries()) {
    assert.equal(step.finishReason, 'tool-calls');
    assert.equal(typeof step.toolCalls[0].input.query, 'string');
    if (i > 0) assert.ok(step.usage.cachedInputTokens >= result.steps[i - 1].usage.inputTokens,
      `step ${i}: cached ${step.usage.cachedInputTokens} < previous prompt ${result.steps[i - 1].usage.inputTokens}`);
  }
});
