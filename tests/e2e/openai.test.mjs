// warmstart serve through the official OpenAI Node client: streaming and non-streaming
// chat, usage with cached tokens across turns, and errors surfacing as the client's typed
// exceptions. Starts its own server (WS_BINARY, WS_MODEL) unless WS_SERVER_URL is given
// (then WS_API_KEY is the key that server expects, if any).
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const API_KEY = process.env.WS_SERVER_URL ? (process.env.WS_API_KEY ?? 'none') : 'e2e-key';
let baseURL = process.env.WS_SERVER_URL;
let server;

// Starts `warmstart serve --port 0` and resolves with the URL it prints.
function startServer() {
  const { WS_BINARY, WS_MODEL } = process.env;
  if (!WS_BINARY || !WS_MODEL) throw new Error('set WS_BINARY and WS_MODEL (or WS_SERVER_URL)');
  server = spawn(WS_BINARY, ['serve', '-m', WS_MODEL, '--port', '0', '-t', '2', '--api-key', API_KEY,
    '--cache-budget-mb', '64'], { stdio: ['ignore', 'ignore', 'pipe'] });
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

before(async () => {
  if (!baseURL) baseURL = await startServer();
});
after(() => server?.kill('SIGTERM'));

const client = () => new OpenAI({ apiKey: API_KEY, baseURL: baseURL + '/v1', maxRetries: 0 });
const question = (text) => [
  { role: 'system', content: 'You are a brief assistant.' },
  { role: 'user', content: text },
];

test('non-streaming chat completion', async () => {
  const r = await client().chat.completions.create({
    model: 'whatever-the-client-says', messages: question('Hello!'), max_tokens: 8, temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

test('streaming chat completion matches the non-streaming answer', async () => {
  const body = { model: 'm', messages: question('Tell me a story.'), max_tokens: 10, temperature: 0 };
  const whole = await client().chat.completions.create(body);
  const stream = await client().chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 3);
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

test('later turns of a conversation report cached tokens', async () => {
  const messages = question('First question.');
  for (let turn = 1; turn <= 3; turn++) {
    const r = await client().chat.completions.create({ model: 'm', messages, max_tokens: 6, temperature: 0 });
    if (turn > 1) assert.ok(r.usage.prompt_tokens_details.cached_tokens > 0, `turn ${turn}`);
    messages.push({ role: 'assistant', content: r.choices[0].message.content });
    messages.push({ role: 'user', content: `Follow-up number ${turn}.` });
  }
});

test('n=2: two choices from one prompt, streamed interleaved by index', async () => {
  const body = { model: 'm', messages: question('Name a fruit.'), max_tokens: 6, temperature: 0, n: 2 };
  const whole = await client().chat.completions.create(body);
  assert.deepEqual(whole.choices.map((c) => c.index), [0, 1]);
  assert.equal(whole.choices[0].message.content, whole.choices[1].message.content);
  const stream = await client().chat.completions.create({ ...body, stream: true });
  const text = ['', ''];
  for await (const chunk of stream) for (const c of chunk.choices) text[c.index] += c.delta.content ?? '';
  assert.deepEqual(text, whole.choices.map((c) => c.message.content));
});

test('logprobs and top_logprobs, whole and streamed', async () => {
  const body = { model: 'm', messages: question('Say something.'), max_tokens: 5, temperature: 0, logprobs: true,
    top_logprobs: 2 };
  const whole = await client().chat.completions.create(body);
  const content = whole.choices[0].logprobs.content;
  assert.ok(content.length > 0);
  assert.equal(content.map((t) => t.token).join(''), whole.choices[0].message.content);
  for (const t of content) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 2);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
    assert.deepEqual(Buffer.from(t.bytes).toString('utf8'), t.token);
  }
  const stream = await client().chat.completions.create({ ...body, stream: true });
  const streamed = [];
  for await (const chunk of stream) for (const c of chunk.choices) streamed.push(...(c.logprobs?.content ?? []));
  assert.deepEqual(streamed, content);
});

test('invalid requests raise BadRequestError with the field named', async () => {
  await assert.rejects(
    client().chat.completions.create({ model: 'm', messages: question('x'), n: 17 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'n');
  await assert.rejects(
    client().chat.completions.create({ model: 'm', messages: question('x'), temperature: 'hot' }),
    (e) => e instanceof OpenAI.BadRequestError && /temperature/.test(e.message));
});

test('a wrong API key raises AuthenticationError', { skip: !!process.env.WS_SERVER_URL && !process.env.WS_API_KEY },
  async () => {
    const bad = new OpenAI({ apiKey: 'wrong', baseURL: baseURL + '/v1', maxRetries: 0 });
    await assert.rejects(bad.chat.completions.create({ model: 'm', messages: question('hi'), max_tokens: 1 }),
      (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    // The model list is public, as llama-server leaves it.
    assert.equal((await bad.models.list()).data.length, 1);
    const models = await client().models.list();
    assert.equal(models.data.length, 1);
  });

test('tools on the model\'s own template: a forced call in the generic shape, and the OpenAI wire history renders', async () => {
  const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object',
    properties: { key: { type: 'string', enum: ['a', 'b'] } }, required: ['key'] } } }];
  const messages = question('Look it up.');
  // The grammar bounds whitespace between tokens, not its sum: a random-weight model took up
  // to ~80 tokens for this call over 40 seeds (64 cut 6 of 30 short, a flaky test).
  const r = await client().chat.completions.create({ model: 'm', messages, tools, tool_choice: 'required',
    max_tokens: 400, seed: 7 });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, null);
  const call = c.message.tool_calls[0];
  assert.equal(call.function.name, 'lookup');
  assert.ok(['a', 'b'].includes(JSON.parse(call.function.arguments).key));
  // content null beside tool_calls, then the tool's result: accepted (it was a 500).
  const next = await client().chat.completions.create({ model: 'm', max_tokens: 4, tools,
    messages: [...messages, c.message, { role: 'tool', tool_call_id: call.id, content: 'found' }] });
  assert.equal(typeof next.choices[0].message.content, 'string');
});

test('Responses API: create, stream and a function-call round trip agree with chat completions', async () => {
  const input = [{ role: 'developer', content: 'You are a brief assistant.' }, { role: 'user', content: 'Hello!' }];
  const r = await client().responses.create({ model: 'm', input, max_output_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  const chat = await client().chat.completions.create({ model: 'm', messages: question('Hello!'), max_tokens: 8,
    temperature: 0 });
  assert.equal(r.output_text, chat.choices[0].message.content);
  assert.equal(r.status, chat.choices[0].finish_reason === 'length' ? 'incomplete' : 'completed');
  assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
  // responses.stream: the helper accumulates the events into the same response.
  const stream = client().responses.stream({ model: 'm', input, max_output_tokens: 8, temperature: 0 });
  let deltas = '';
  stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
  const streamed = await stream.finalResponse();
  assert.equal(deltas, r.output_text);
  // (Cut short by max_output_tokens the stream ends in response.incomplete, which this client
  // version does not fold into its snapshot: the items it accumulated are the answer.)
  const text = streamed.output.filter((o) => o.type === 'message').flatMap((o) => o.content).map((c) => c.text).join('');
  assert.equal(text, r.output_text);
  // A forced call, then its output as the next turn's input.
  const tools = [{ type: 'function', name: 'lookup', strict: false, parameters: { type: 'object',
    properties: { key: { type: 'string', enum: ['a', 'b'] } }, required: ['key'] } }];
  // Greedy and room for the whitespace the grammar allows between tokens (sampled with 64
  // tokens, it was cut short now and then, as the tool_choice test below was).
  const called = await client().responses.create({ model: 'm', input: 'Look it up.', tools, max_output_tokens: 400,
    tool_choice: { type: 'function', name: 'lookup' }, temperature: 0 });
  const call = called.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(called.output));
  assert.ok(['a', 'b'].includes(JSON.parse(call.arguments).key));
  const next = await client().responses.create({ model: 'm', tools, max_output_tokens: 4, input: [
    { role: 'user', content: 'Look it up.' }, call, { type: 'function_call_output', call_id: call.call_id, output: 'found' }] });
  assert.equal(typeof next.output_text, 'string');
  assert.ok(next.usage.input_tokens_details.cached_tokens > 0);
  await assert.rejects(
    client().responses.create({ model: 'm', input: 'x', previous_response_id: 'resp_1' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id');
});
