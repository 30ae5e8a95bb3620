// LangChain.js (ChatOpenAI over the Responses API) against 'tulip serve':
//   node langchain.mjs BASE_URL MODE SCENARIO ORDER
//   MODE: invoke | stream (streaming: true); SCENARIO: refund | client.
// For client, the caller loop runs the bound tool and invokes again with
// the whole message list, as LangChain's users do.
import { ChatOpenAI } from '@langchain/openai';
import { tool } from '@langchain/core/tools';
import { HumanMessage } from '@langchain/core/messages';
import { z } from 'zod';
import { errorShape, print, weather } from './common.mjs';

const [, , base, mode, scenario, order] = process.argv;
let calls = 0;
const lookup = tool(async ({ city }) => { calls++; return JSON.stringify({ ...weather, city }); },
  { name: 'lookup_weather', description: 'Looks up the weather in a city.', schema: z.object({ city: z.string() }) });
const llm = new ChatOpenAI({ model: 'support', apiKey: 'unused', useResponsesApi: true, streaming: mode === 'stream', maxRetries: 0,
  configuration: { baseURL: base, defaultHeaders: { 'X-Tulip-Thread': `langchain-${mode}-${scenario}-${order}` } } });
const model = scenario === 'client' ? llm.bindTools([lookup]) : llm;
const msgs = [new HumanMessage(scenario === 'client' ? 'What is the weather in Paris?' : `Please refund ${order}`)];
let out;
try {
  const turns = [];
  const usage = { input: 0, output: 0, total: 0 };
  for (let i = 0; i < 3; i++) {
    const ai = await model.invoke(msgs);
    turns.push({ text: ai.text, toolCalls: ai.tool_calls.map(c => c.name), invalid: ai.invalid_tool_calls.length,
      toolOutputs: (ai.additional_kwargs.tool_outputs ?? []).map(o => `${o.type}:${o.name ?? ''}`) });
    usage.input += ai.usage_metadata?.input_tokens ?? 0;
    usage.output += ai.usage_metadata?.output_tokens ?? 0;
    usage.total += ai.usage_metadata?.total_tokens ?? 0;
    if (!ai.tool_calls.length || scenario !== 'client') break;
    msgs.push(ai);
    for (const c of ai.tool_calls) msgs.push(await lookup.invoke(c));
  }
  out = { turns, text: turns[turns.length - 1].text, usage };
} catch (e) {
  out = { error: errorShape(e) };
}
print({ ...out, calls });
