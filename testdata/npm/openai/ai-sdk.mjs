// The ai SDK with @ai-sdk/openai-compatible against nb: generateText and
// streamText with a client tool over several steps.
import assert from 'node:assert/strict';
import { generateText, streamText, tool, stepCountIs } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { z } from 'zod';

const nb = createOpenAICompatible({
  name: 'nb', baseURL: process.env.NB_BASE_URL, apiKey: process.env.NB_TOKEN, includeUsage: true,
});
const model = nb(process.env.NB_MODEL ?? 'echo');
const calls = [];
const tools = {
  lookup: tool({
    description: 'Looks a word up.',
    inputSchema: z.object({ q: z.string() }),
    execute: async ({ q }) => { calls.push(q); return `found ${q}`; },
  }),
};

const plain = await generateText({ model, prompt: 'hi' });
assert.equal(plain.text, 'echo: hi');
assert.equal(plain.finishReason, 'stop');
console.log('ok generateText');

const g = await generateText({ model, tools, stopWhen: stepCountIs(5), prompt: 'call lookup {"q":"nano"}' });
assert.deepEqual(calls, ['nano']);
assert.equal(g.steps.length, 2);
assert.equal(g.steps[0].finishReason, 'tool-calls');
assert.equal(g.text, 'tool lookup said: found nano');
assert.ok(g.totalUsage.inputTokens >= 0);
console.log('ok generateText with a tool');

const s = streamText({ model, tools, stopWhen: stepCountIs(5), prompt: 'call lookup {"q":"bots"}' });
let streamed = '';
for await (const part of s.textStream) streamed += part;
assert.deepEqual(calls, ['nano', 'bots']);
assert.equal(streamed, 'tool lookup said: found bots');
assert.equal((await s.steps).length, 2);
assert.equal(await s.finishReason, 'stop');
const usage = await s.totalUsage;
assert.ok(usage.totalTokens >= 0, JSON.stringify(usage));
console.log('ok streamText with a tool');
