// The OpenAI Agents SDK (JS) against 'tulip serve': node agents.mjs BASE_URL MODE SCENARIO ORDER
//   MODE: run | stream; SCENARIO: refund | client (see aisdk.mjs).
// The agent always has the client function tool lookup_weather.
import { Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { errorShape, print, weather } from './common.mjs';

const [, , base, mode, scenario, order] = process.argv;
setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL: base, apiKey: 'unused', maxRetries: 0,
  defaultHeaders: { 'X-Tulip-Thread': `agents-${mode}-${scenario}-${order}` } }));
setOpenAIAPI('responses');
let calls = 0;
const lookup = tool({
  name: 'lookup_weather',
  description: 'Looks up the weather in a city.',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => { calls++; return JSON.stringify({ ...weather, city }); },
});
const agent = new Agent({ name: 'support-desk', model: 'support', tools: [lookup] });
const prompt = scenario === 'client' ? 'What is the weather in Paris?' : `Please refund ${order}`;
let out;
try {
  let result;
  if (mode === 'stream') {
    result = await run(agent, prompt, { stream: true });
    for await (const _ of result) { /* drain */ }
    await result.completed;
    if (result.error) throw result.error;
  } else {
    result = await run(agent, prompt);
  }
  const items = result.newItems.map(i => ({ type: i.type, raw: i.rawItem.type, name: i.rawItem.providerData?.name ?? i.rawItem.name }));
  const u = result.state.usage;
  out = { text: result.finalOutput, items, usage: { input: u.inputTokens, output: u.outputTokens, total: u.totalTokens, requests: u.requests } };
} catch (e) {
  out = { error: errorShape(e) };
}
print({ ...out, calls });
