// The openai SDK against nb's OpenAI-compatible API: chat completions
// whole and streamed, a client tool round trip, errors as APIError with
// their status, and the Responses API. NB_BASE_URL and NB_TOKEN say where.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.NB_BASE_URL, apiKey: process.env.NB_TOKEN, maxRetries: 0 });
const model = process.env.NB_MODEL ?? 'echo';

// Models.
const models = [];
for await (const m of client.models.list()) models.push(m.id);
assert.ok(models.includes(model), `models: ${models}`);
const one = await client.models.retrieve(model);
assert.equal(one.id, model);
assert.equal(one.object, 'model');
console.log('ok models');

// A whole answer.
const whole = await client.chat.completions.create({
  model,
  messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }],
});
assert.equal(whole.object, 'chat.completion');
assert.equal(whole.choices[0].message.content, 'echo: hi');
assert.equal(whole.choices[0].finish_reason, 'stop');
assert.ok(whole.usage.total_tokens >= 0);
console.log('ok chat whole');

// A streamed answer, with the usage chunk.
const stream = await client.chat.completions.create({
  model, stream: true, stream_options: { include_usage: true },
  messages: [{ role: 'user', content: 'stream me' }],
});
let text = '', finish = null, usage = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  assert.equal(chunk.object, 'chat.completion.chunk');
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    text += c.delta.content ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
}
assert.equal(text, 'echo: stream me');
assert.equal(finish, 'stop');
assert.ok(usage && usage.total_tokens === usage.prompt_tokens + usage.completion_tokens, JSON.stringify(usage));
assert.ok(chunks > 3, `${chunks} chunks`);
console.log('ok chat stream');

// The SDK's stream helper assembles the chunks itself, tool calls too.
const tools = [{
  type: 'function',
  function: { name: 'lookup', description: 'Looks a word up.', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } },
}];
const messages = [{ role: 'user', content: 'call lookup {"q":"nano bots"}' }];
const runner = client.chat.completions.stream({ model, tools, messages });
const first = await runner.finalChatCompletion();
const call = first.choices[0].message.tool_calls?.[0];
assert.equal(first.choices[0].finish_reason, 'tool_calls');
assert.equal(call?.function.name, 'lookup');
assert.deepEqual(JSON.parse(call.function.arguments), { q: 'nano bots' });
messages.push(first.choices[0].message);
messages.push({ role: 'tool', tool_call_id: call.id, content: 'found ' + JSON.parse(call.function.arguments).q });
const second = await client.chat.completions.create({ model, tools, messages });
assert.equal(second.choices[0].message.content, 'tool lookup said: found nano bots');
console.log('ok chat client tool');

// Errors are APIErrors with their status.
await assert.rejects(
  client.chat.completions.create({ model: 'no-such-cartridge', messages: [{ role: 'user', content: 'hi' }] }),
  (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError, String(err));
    assert.equal(err.status, 404);
    assert.equal(err.code, 'model_not_found');
    assert.equal(err.param, 'model');
    return true;
  });
await assert.rejects(
  client.chat.completions.create({ model, messages: [{ role: 'user', content: 'fail please' }] }),
  (err) => {
    assert.ok(err instanceof OpenAI.APIError, String(err));
    assert.equal(err.status, 502);
    assert.match(err.message, /the provider failed/);
    return true;
  });
// A stream that fails once it began surfaces as an APIError too.
await assert.rejects(async () => {
  const s = await client.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'break midway' }] });
  for await (const _ of s) { /* drain */ }
}, (err) => {
  assert.ok(err instanceof OpenAI.APIError, String(err));
  assert.match(err.message, /the provider failed/);
  return true;
});
if (process.env.NB_CHECK_AUTH) {
  // A wrong token: the server's 401, in OpenAI's shape.
  const stranger = new OpenAI({ baseURL: process.env.NB_BASE_URL, apiKey: 'not-the-token', maxRetries: 0 });
  await assert.rejects(stranger.models.list(), (err) => {
    assert.ok(err instanceof OpenAI.AuthenticationError, String(err));
    assert.equal(err.status, 401);
    return true;
  });
}
console.log('ok errors');

// The Responses API, whole and streamed.
const r = await client.responses.create({ model, instructions: 'Be brief.', input: 'respond' });
assert.equal(r.status, 'completed');
assert.equal(r.output_text, 'echo: respond');
const r2 = await client.responses.create({ model, previous_response_id: r.id, input: 'and again' });
assert.equal(r2.output_text, 'echo: and again');
const kept = await client.responses.retrieve(r.id);
assert.equal(kept.id, r.id);
const rs = client.responses.stream({ model, input: 'stream a response' });
let deltas = '';
rs.on('response.output_text.delta', (e) => { deltas += e.delta; });
const final = await rs.finalResponse();
assert.equal(deltas, 'echo: stream a response');
assert.equal(final.output_text, 'echo: stream a response');
console.log('ok responses');
