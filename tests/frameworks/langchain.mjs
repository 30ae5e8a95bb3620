// LangChain.js (ChatOpenAI over the Responses API) against 'tulip serve':
//   node langchain.mjs BASE_URL MODE SCENARIO ORDER
//   MODE: invoke | stream (streaming: true); SCENARIO: refund | client;
//   multiturn | approve | decline, through langchain's createAgent (MODE
//   stream: agent.stream, streamMode "values"): multiturn invokes it with
//   "Please refund ORDER", then with its messages and "are you sure?
//   refund ORDER"; approve | decline with "isolate HOST", then with its
//   messages and a HumanMessage whose content is the mcp_approval_response
//   block answering the AIMessage's mcp_approval_request (its
//   additional_kwargs.tool_outputs).
// For client, the caller loop runs the bound tool and invokes again with
// the whole message list, as LangChain's users do.
import { ChatOpenAI } from '@langchain/openai';
import { tool } from '@langchain/core/tools';
import { HumanMessage } from '@langchain/core/messages';
import { createAgent } from 'langchain';
import { z } from 'zod';
import { errorShape, print, tap, weather } from './common.mjs';

const [, , base, mode, scenario, order] = process.argv;
const wire = tap();
let calls = 0;
const lookup = tool(async ({ city }) => { calls++; return JSON.stringify({ ...weather, city }); },
  { name: 'lookup_weather', description: 'Looks up the weather in a city.', schema: z.object({ city: z.string() }) });
const llm = new ChatOpenAI({ model: 'support', apiKey: 'unused', useResponsesApi: true, streaming: mode === 'stream', maxRetries: 0,
  configuration: { baseURL: base, fetch: wire.fetch, defaultHeaders: { 'X-Tulip-Thread': `langchain-${mode}-${scenario}-${order}` } } });

// turn is what a test reads of an AIMessage.
const turn = ai => ({ text: ai.text, toolCalls: ai.tool_calls.map(c => c.name), invalid: ai.invalid_tool_calls.length,
  toolOutputs: (ai.additional_kwargs.tool_outputs ?? []).map(o => `${o.type}:${o.name ?? ''}`) });

// agentTurn runs a createAgent agent on messages (invoke, or stream's last
// values) and returns its messages.
async function agentTurn(agent, messages) {
  if (mode !== 'stream') return (await agent.invoke({ messages })).messages;
  let last;
  for await (const s of await agent.stream({ messages }, { streamMode: 'values' })) last = s;
  return last.messages;
}

let out;
try {
  if (scenario === 'multiturn' || scenario === 'approve' || scenario === 'decline') {
    const agent = createAgent({ model: llm, tools: [] });
    const first = scenario === 'multiturn' ? `Please refund ${order}` : `isolate ${order}`;
    const m1 = await agentTurn(agent, [new HumanMessage(first)]);
    const ai1 = m1.at(-1);
    let next = new HumanMessage(`are you sure? refund ${order}`);
    let approvals;
    if (scenario !== 'multiturn') {
      const asks = (ai1.additional_kwargs.tool_outputs ?? []).filter(o => o.type === 'mcp_approval_request');
      approvals = asks.map(a => a.name);
      if (asks.length !== 1) throw new Error(`one mcp_approval_request expected, got: ${JSON.stringify(ai1.additional_kwargs)}`);
      next = new HumanMessage({ content: [{ type: 'mcp_approval_response', approval_request_id: asks[0].id, approve: scenario === 'approve' }] });
    }
    const m2 = await agentTurn(agent, [...m1, next]);
    const ai2 = m2.at(-1);
    out = { turns: [turn(ai1), turn(ai2)], texts: [ai1.text, ai2.text], text: ai2.text, approvals };
  } else {
    const model = scenario === 'client' ? llm.bindTools([lookup]) : llm;
    const msgs = [new HumanMessage(scenario === 'client' ? 'What is the weather in Paris?' : `Please refund ${order}`)];
    const turns = [];
    const usage = { input: 0, output: 0, total: 0 };
    for (let i = 0; i < 3; i++) {
      const ai = await model.invoke(msgs);
      turns.push(turn(ai));
      usage.input += ai.usage_metadata?.input_tokens ?? 0;
      usage.output += ai.usage_metadata?.output_tokens ?? 0;
      usage.total += ai.usage_metadata?.total_tokens ?? 0;
      if (!ai.tool_calls.length || scenario !== 'client') break;
      msgs.push(ai);
      for (const c of ai.tool_calls) msgs.push(await lookup.invoke(c));
    }
    out = { turns, text: turns[turns.length - 1].text, usage };
  }
} catch (e) {
  out = { error: errorShape(e) };
}
await wire.settled();
print({ ...out, calls, requests: wire.requests });
