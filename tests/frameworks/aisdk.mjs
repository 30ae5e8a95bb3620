// The Vercel AI SDK against 'tulip serve': node aisdk.mjs BASE_URL API MODE SCENARIO ORDER
//   API: responses | chat (openai.responses / openai.chat)
//   MODE: generate | stream (generateText / streamText)
//   SCENARIO: refund (no client tools), collide (a client tool named
//   issue_refund), client (a client tool lookup_weather, asked about weather)
// Prints one JSON line: text, error {status,message}, calls (client tool
// executions), steps, usage, toolCalls (client-side), serverCalls
// (provider-executed tool names).
import { generateText, streamText, stepCountIs, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';
import { errorShape, print, weather } from './common.mjs';

const [, , base, api, mode, scenario, order] = process.argv;
const thread = `aisdk-${api}-${mode}-${scenario}-${order}`;
const openai = createOpenAI({ baseURL: base, apiKey: 'unused', headers: { 'X-Tulip-Thread': thread } });
const model = api === 'chat' ? openai.chat('support') : openai.responses('support');
let calls = 0;
let tools;
let prompt = `Please refund ${order}`;
if (scenario === 'collide') {
  tools = {
    issue_refund: tool({
      description: 'Refunds an order (a client-side tool that collides with the agent\'s).',
      inputSchema: z.object({ order_id: z.string(), amount: z.number() }),
      execute: async () => { calls++; return { refunded: true }; },
    }),
  };
} else if (scenario === 'client') {
  prompt = 'What is the weather in Paris?';
  tools = {
    lookup_weather: tool({
      description: 'Looks up the weather in a city.',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => { calls++; return { ...weather, city }; },
    }),
  };
}
const opts = { model, prompt, tools, stopWhen: stepCountIs(3), maxRetries: 0 };

function summary(steps, text, usage) {
  const toolCalls = [], serverCalls = [];
  for (const s of steps) for (const c of s.content) if (c.type === 'tool-call') (c.providerExecuted ? serverCalls : toolCalls).push(c.toolName);
  return { text, steps: steps.length, usage: { input: usage.inputTokens, output: usage.outputTokens, total: usage.totalTokens }, toolCalls, serverCalls };
}

let out;
try {
  if (mode === 'stream') {
    let streamErr;
    const s = streamText({ ...opts, onError: ({ error }) => { streamErr ??= error; } });
    for await (const p of s.fullStream) if (p.type === 'error') streamErr ??= p.error;
    if (streamErr) throw streamErr;
    out = summary(await s.steps, await s.text, await s.totalUsage);
  } else {
    const g = await generateText(opts);
    out = summary(g.steps, g.text, g.totalUsage);
  }
} catch (e) {
  out = { error: errorShape(e) };
}
print({ ...out, calls });
