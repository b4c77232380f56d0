// @openai/agents against nb's Responses endpoint: an agent with a
// function tool, run whole and streamed. Tracing is off: it would send
// traces to OpenAI.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';

setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL: process.env.NB_BASE_URL, apiKey: process.env.NB_TOKEN, maxRetries: 0 }));
setOpenAIAPI('responses');

const calls = [];
const lookup = tool({
  name: 'lookup',
  description: 'Looks a word up.',
  parameters: z.object({ q: z.string() }),
  execute: async ({ q }) => { calls.push(q); return `found ${q}`; },
});
const agent = new Agent({ name: 'Tester', instructions: 'Use your tools.', model: process.env.NB_MODEL ?? 'echo', tools: [lookup] });

const result = await run(agent, 'call lookup {"q":"agents"}');
assert.deepEqual(calls, ['agents']);
assert.equal(result.finalOutput, 'tool lookup said: found agents');
console.log('ok agent run');

const streamed = await run(agent, 'call lookup {"q":"streams"}', { stream: true });
let text = '';
for await (const ev of streamed.toTextStream()) text += ev;
await streamed.completed;
assert.deepEqual(calls, ['agents', 'streams']);
assert.equal(streamed.finalOutput, 'tool lookup said: found streams');
assert.equal(text, 'tool lookup said: found streams');
console.log('ok agent run streamed');

// A conversation continued on the server with previous_response_id.
const first = await run(agent, 'hello');
assert.equal(first.finalOutput, 'echo: hello');
const next = await run(agent, 'again', { previousResponseId: first.lastResponseId });
assert.equal(next.finalOutput, 'echo: again');
console.log('ok agent previous response');
