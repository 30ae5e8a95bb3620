// The OpenAI Agents SDK (JS) against 'tulip serve': node agents.mjs BASE_URL MODE SCENARIO ORDER
//   MODE: run | stream; SCENARIO: refund | client (see aisdk.mjs);
//   multiturn (run, then run again with result.history and "are you sure?
//   refund ORDER"); approve | decline ("isolate HOST": the agent declares
//   the server's tools as hostedMcpTool tulip with requireApproval, the run
//   stops with an interruption, state.approve / state.reject, run again
//   with the state).
// The agent always has the client function tool lookup_weather.
import { Agent, run, tool, user, hostedMcpTool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { errorShape, print, tap, weather } from './common.mjs';

const [, , base, mode, scenario, order] = process.argv;
setTracingDisabled(true);
const wire = tap();
setDefaultOpenAIClient(new OpenAI({ baseURL: base, apiKey: 'unused', maxRetries: 0, fetch: wire.fetch,
  defaultHeaders: { 'X-Tulip-Thread': `agents-${mode}-${scenario}-${order}` } }));
setOpenAIAPI('responses');
let calls = 0;
const lookup = tool({
  name: 'lookup_weather',
  description: 'Looks up the weather in a city.',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => { calls++; return JSON.stringify({ ...weather, city }); },
});
const approval = scenario === 'approve' || scenario === 'decline';
const tools = approval ? [lookup, hostedMcpTool({ serverLabel: 'tulip', serverUrl: 'http://unused', requireApproval: 'always' })] : [lookup];
const agent = new Agent({ name: 'support-desk', model: 'support', tools });

// go runs the agent (streamed or not, by MODE) to its end.
async function go(input) {
  if (mode !== 'stream') return run(agent, input);
  const result = await run(agent, input, { stream: true });
  for await (const _ of result) { /* drain */ }
  await result.completed;
  if (result.error) throw result.error;
  return result;
}

const prompt = scenario === 'client' ? 'What is the weather in Paris?' : approval ? `isolate ${order}` : `Please refund ${order}`;
let out;
try {
  let result = await go(prompt);
  const texts = [result.finalOutput ?? ''];
  let interruptions;
  if (scenario === 'multiturn') {
    result = await go([...result.history, user(`are you sure? refund ${order}`)]);
    texts.push(result.finalOutput);
  } else if (approval) {
    interruptions = result.interruptions.map(i => i.rawItem.name ?? i.name);
    if (result.interruptions.length !== 1) throw new Error(`one interruption expected, got ${JSON.stringify(result.interruptions)}`);
    for (const i of result.interruptions) {
      if (scenario === 'approve') result.state.approve(i);
      else result.state.reject(i, { message: 'not now' });
    }
    result = await go(result.state);
    texts.push(result.finalOutput);
  }
  const items = result.newItems.map(i => ({ type: i.type, raw: i.rawItem.type, name: i.rawItem.providerData?.name ?? i.rawItem.name }));
  const u = result.state.usage;
  out = { text: result.finalOutput, items, texts, interruptions, usage: { input: u.inputTokens, output: u.outputTokens, total: u.totalTokens, requests: u.requests } };
} catch (e) {
  out = { error: errorShape(e) };
}
await wire.settled();
print({ ...out, calls, requests: wire.requests });
