// tests/serve/sdk_test.mjs — `toy serve` driven by the official OpenAI Node SDK (openai@4).
//
// usage: node sdk_test.mjs BASE_URL MODEL      e.g. node sdk_test.mjs http://127.0.0.1:8080/v1 smol
// Needs `npm install` next to it (package.json pins the SDK). tests/test_serve.cpp copies this file
// into the build tree, installs the SDK there and runs it against a server it started. Prints one
// line per check and exits 1 at the first failure.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [baseURL, model] = process.argv.slice(2);
if (!baseURL || !model) {
  console.error('usage: node sdk_test.mjs BASE_URL MODEL');
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey: 'not-needed', maxRetries: 0, timeout: 60_000 });
const messages = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Tell me a story about a cat.' },
];

let checks = 0;
async function check(name, fn) {
  try {
    await fn();
    checks++;
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    process.exit(1);
  }
}

function checkUsage(usage) {
  assert.ok(usage.prompt_tokens > 0, 'prompt_tokens > 0');
  assert.ok(usage.completion_tokens >= 0);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
}

await check('models.list', async () => {
  const list = await client.models.list();
  assert.ok(list.data.some((m) => m.id === model), `model ${model} listed`);
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
});

let chatText;
await check('chat.completions.create', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  checkUsage(r.usage);
  assert.ok(r.usage.completion_tokens <= 12);
  if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, 12);
  chatText = r.choices[0].message.content;
});

await check('chat.completions.create stream + include_usage', async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = '', first = true, finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) { usage = chunk.usage; assert.equal(chunk.choices.length, 0); continue; }
    const c = chunk.choices[0];
    if (first) { assert.equal(c.delta.role, 'assistant'); first = false; }
    text += c.delta.content ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.ok(chunks >= 2);
  assert.ok(['stop', 'length'].includes(finish));
  assert.ok(usage, 'a usage chunk');
  checkUsage(usage);
  assert.equal(text, chatText, 'greedy stream == greedy non-stream');
});

await check('several streams at once: each as it is alone (batched decode keeps every row\'s bits)', async () => {
  const asks = ['Tell me a story about a cat.', 'Name three colours.', 'What is two plus two?', 'Say hello.'].map(
    (content) => [{ role: 'user', content }]);
  const alone = [];
  for (const m of asks)
    alone.push((await client.chat.completions.create({ model, messages: m, max_tokens: 10, temperature: 0 })).choices[0].message.content);
  const together = await Promise.all(asks.map(async (m) => {
    const stream = await client.chat.completions.create({ model, messages: m, max_tokens: 10, temperature: 0, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    return text;
  }));
  assert.deepEqual(together, alone);
});

await check('chat.completions.stream helper (finalChatCompletion)', async () => {
  const runner = client.beta.chat.completions.stream({ model, messages, max_tokens: 12, temperature: 0 });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, chatText);
});

await check('chat logprobs', async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const t of content) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-9, 'greedy picks the most likely token');
    if (!t.token.includes('\uFFFD')) assert.deepEqual(t.bytes, [...Buffer.from(t.token, 'utf8')]);
  }
});

let completionText;
await check('completions.create', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  checkUsage(r.usage);
  completionText = r.choices[0].text;
});

await check('completions.create stream', async () => {
  const stream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0, stream: true });
  let text = '', finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'text_completion');
    text += chunk.choices[0].text;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.ok(['stop', 'length'].includes(finish));
  assert.equal(text, completionText);
});

await check('completions echo + logprobs (prompt log-probs, as evaluation harnesses ask)', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 1, temperature: 0, echo: true, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  const n = r.usage.prompt_tokens + r.usage.completion_tokens;
  assert.equal(lp.tokens.length, n);
  assert.equal(lp.token_logprobs.length, n);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  for (let i = 1; i < n; i++) {
    assert.ok(lp.token_logprobs[i] <= 0);
    assert.ok(Object.keys(lp.top_logprobs[i]).length >= 1);
  }
  assert.ok(r.choices[0].text.startsWith('Once upon a time'));
});

await check('completions with a token-id prompt', async () => {
  const r = await client.completions.create({ model, prompt: [1, 2, 3], max_tokens: 3, temperature: 0 });
  assert.equal(r.usage.prompt_tokens, 3);
});

await check('seeded sampling is reproducible', async () => {
  const ask = () => client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 1, top_p: 0.9, seed: 42 });
  const [a, b] = [await ask(), await ask()];
  assert.equal(a.choices[0].text, b.choices[0].text);
});

await check('n > 1 choices: chat and completions, streamed and not, seeded', async () => {
  const chat = (extra) => client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 1, seed: 11, n: 3, ...extra });
  const a = await chat({}), b = await chat({});
  assert.equal(a.choices.length, 3);
  a.choices.forEach((c, i) => assert.equal(c.index, i));
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content), 'same seed, same choices');
  assert.ok(new Set(a.choices.map((c) => c.message.content)).size > 1, 'the choices differ');
  checkUsage(a.usage);
  const withLogprobs = await chat({ logprobs: true });  // every choice's tokens count in usage
  assert.equal(withLogprobs.usage.completion_tokens, withLogprobs.choices.reduce((n, c) => n + c.logprobs.content.length, 0));
  // Streamed: the SDK's helper puts the choices together by index.
  const final = await client.beta.chat.completions.stream({ model, messages, max_tokens: 8, temperature: 1, seed: 11, n: 3 }).finalChatCompletion();
  assert.deepEqual(final.choices.map((c) => c.message.content), a.choices.map((c) => c.message.content));
  // A choice of n = 3 is the answer of n = 1 with seed + index.
  const third = await chat({ n: 1, seed: 13 });
  assert.equal(third.choices[0].message.content, a.choices[2].message.content);

  const comp = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6, temperature: 1, seed: 3, n: 2 });
  assert.equal(comp.choices.length, 2);
  const stream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6, temperature: 1, seed: 3, n: 2, stream: true });
  const texts = ['', ''];
  for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.text;
  assert.deepEqual(texts, comp.choices.map((c) => c.text));
});

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'The weather in a city',
    parameters: {
      type: 'object', additionalProperties: false, required: ['city', 'unit'],
      properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['C', 'F'] } },
    },
  },
};
const validWeather = (args) => typeof args.city === 'string' && ['C', 'F'].includes(args.unit) && Object.keys(args).length === 2;

await check('tools: a named tool_choice gives a call whose arguments validate', async () => {
  const r = await client.chat.completions.create({
    model, messages, tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'get_weather' } },
    max_tokens: 200, temperature: 1, seed: 5, n: 4,
  });
  for (const c of r.choices) {
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.content, null);
    const call = c.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.equal(typeof call.function.arguments, 'string', 'arguments are a JSON string, as OpenAI sends them');
    assert.ok(validWeather(JSON.parse(call.function.arguments)), call.function.arguments);
  }
  // The call and its result, sent back, render through the template.
  const call = r.choices[0].message.tool_calls[0];
  const next = await client.chat.completions.create({
    model, tools: [weatherTool], max_tokens: 4,
    messages: [...messages, r.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' }],
  });
  assert.ok(['stop', 'length', 'tool_calls'].includes(next.choices[0].finish_reason));
});

await check('tools: streamed calls (the SDK helper puts the argument deltas together)', async () => {
  const final = await client.beta.chat.completions.stream({
    model, messages, tools: [weatherTool], tool_choice: 'required', parallel_tool_calls: false,
    max_tokens: 200, temperature: 1, seed: 9,
  }).finalChatCompletion();
  const c = final.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.tool_calls.length, 1);
  assert.ok(validWeather(JSON.parse(c.message.tool_calls[0].function.arguments)));
});

await check('response_format json_schema and json_object', async () => {
  const schema = { type: 'object', additionalProperties: false, required: ['name', 'tags'],
    properties: { name: { type: 'string', maxLength: 10 }, tags: { type: 'array', items: { type: 'integer' }, maxItems: 3 } } };
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 300, temperature: 1, seed: 2, n: 3,
    response_format: { type: 'json_schema', json_schema: { name: 'thing', schema, strict: true } },
  });
  for (const c of r.choices) {
    assert.equal(c.finish_reason, 'stop');
    const v = JSON.parse(c.message.content);
    assert.ok(typeof v.name === 'string' && Array.isArray(v.tags) && v.tags.every(Number.isInteger), c.message.content);
  }
  // Any object may hold strings of any length, which a random model rarely closes: a bias towards
  // tokens that close strings and objects (still allowed only where the grammar says).
  const tokens = await fetch(baseURL.replace(/\/v1$/, '') + '/tokenize', {
    method: 'POST', body: JSON.stringify({ content: 'x"}x",x"x}', with_pieces: true }),
  }).then((res) => res.json());
  const logit_bias = Object.fromEntries(tokens.tokens.filter((t) => !t.piece.includes('x')).map((t) => [t.id, 8]));
  const o = await client.chat.completions.create({ model, messages, max_tokens: 600, seed: 4, logit_bias, response_format: { type: 'json_object' } });
  assert.equal(typeof JSON.parse(o.choices[0].message.content), 'object');
  await assert.rejects(client.chat.completions.create({ model, messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'email' } } } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format.json_schema.schema');
});

await check('embeddings.create: float, base64 (the SDK default, which it decodes), several inputs', async () => {
  const input = ['Once upon a time', 'The cat sat on the mat.'];
  const asked = await client.embeddings.create({ model, input, encoding_format: 'float' });
  assert.equal(asked.object, 'list');
  assert.equal(asked.model, model);
  assert.deepEqual(asked.data.map((d) => [d.object, d.index]), [['embedding', 0], ['embedding', 1]]);
  const [a, b] = asked.data.map((d) => d.embedding);
  assert.ok(a.length > 1 && a.length === b.length);
  assert.ok(Math.abs(Math.hypot(...a) - 1) < 1e-6, 'unit L2 norm');
  assert.notDeepEqual(a, b);
  assert.ok(asked.usage.prompt_tokens > 0);
  assert.equal(asked.usage.total_tokens, asked.usage.prompt_tokens);
  // Without encoding_format the SDK asks for base64 and decodes it: the same float32 values.
  const decoded = await client.embeddings.create({ model, input });
  assert.deepEqual(decoded.data.map((d) => d.embedding), [a, b]);
  const raw = await client.embeddings.create({ model, input: input[0], encoding_format: 'base64' });
  const bytes = Buffer.from(raw.data[0].embedding, 'base64');
  assert.deepEqual(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4)), a);
  const one = await client.embeddings.create({ model, input: input[1], dimensions: a.length, encoding_format: 'float' });
  assert.deepEqual(one.data[0].embedding, b, 'an input alone or among others: the same vector');
  await assert.rejects(client.embeddings.create({ model, input: '' }), (e) => e instanceof OpenAI.BadRequestError && e.param === 'input');
  await assert.rejects(client.embeddings.create({ model, input: 'x', dimensions: 3 }), (e) => e instanceof OpenAI.BadRequestError && e.param === 'dimensions');
});

await check('errors become typed SDK exceptions', async () => {
  await assert.rejects(client.models.retrieve('no-such-model'), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  await assert.rejects(client.chat.completions.create({ model, messages: [] }), (e) => e instanceof OpenAI.BadRequestError && e.status === 400);
  await assert.rejects(client.chat.completions.create({ model, messages, temperature: 'hot' }), (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
});

console.log(`sdk_test: ${checks} checks passed`);
