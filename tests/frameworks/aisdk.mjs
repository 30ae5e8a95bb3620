// The Vercel AI SDK against 'tulip serve': node aisdk.mjs BASE_URL API MODE SCENARIO ORDER
//   API: responses | chat (openai.responses / openai.chat)
//   MODE: generate | stream (generateText / streamText)
//   SCENARIO: refund (no client tools), collide (a client tool named
//   issue_refund), client (a client tool lookup_weather, asked about
//   weather); multiturn ("Please refund ORDER", then the conversation
//   resent, as the AI SDK continues one, with "are you sure? refund
//   ORDER"); approve | decline (responses: "isolate HOST", whose approval
//   request the AI SDK shows as a tool-approval-request, answered with a
//   tool-approval-response); onestep (lookup_weather with the default
//   stopWhen, one step, and metadata tulip_client_timeout 3s: the SDK runs
//   the tool but the step ends without sending its result; then the next
//   turn, the conversation as the SDK keeps it (the call and its result)
//   with "thanks", sent again while refused with 409, for up to 20 s);
//   onestep-idle (the same, the next turn sent 4.5 s later: past the
//   timeout).
// Prints one JSON line: text, error {status,message}, calls (client tool
// executions), steps, usage, toolCalls (client-side), serverCalls
// (provider-executed tool names); texts (each turn's); approvals (the
// tool-approval-requests seen); refused, finalStatus, waitedMs (onestep);
// requests (what the server was sent and answered, see tap).
import { generateText, streamText, stepCountIs, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';
import { errorShape, print, tap, weather } from './common.mjs';

const [, , base, api, mode, scenario, order] = process.argv;
const thread = `aisdk-${api}-${mode}-${scenario}-${order}`;
const wire = tap();
const openai = createOpenAI({ baseURL: base, apiKey: 'unused', headers: { 'X-Tulip-Thread': thread }, fetch: wire.fetch });
const model = api === 'chat' ? openai.chat('support') : openai.responses('support');
let calls = 0;
let tools;
let prompt = `Please refund ${order}`;
const lookupWeather = tool({
  description: 'Looks up the weather in a city.',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => { calls++; return { ...weather, city }; },
});
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
  tools = { lookup_weather: lookupWeather };
}
const opts = { model, prompt, tools, stopWhen: stepCountIs(3), maxRetries: 0 };

function summary(steps, text, usage) {
  const toolCalls = [], serverCalls = [];
  for (const s of steps) for (const c of s.content) if (c.type === 'tool-call') (c.providerExecuted ? serverCalls : toolCalls).push(c.toolName);
  return { text, steps: steps.length, usage: { input: usage.inputTokens, output: usage.outputTokens, total: usage.totalTokens }, toolCalls, serverCalls };
}

// call is generateText or streamText (by MODE), as one result.
async function call(o) {
  if (mode !== 'stream') return generateText(o);
  let streamErr;
  const s = streamText({ ...o, onError: ({ error }) => { streamErr ??= error; } });
  for await (const p of s.fullStream) if (p.type === 'error') streamErr ??= p.error;
  if (streamErr) throw streamErr;
  return { steps: await s.steps, text: await s.text, totalUsage: await s.totalUsage, content: await s.content, response: await s.response };
}

const sleep = ms => new Promise(r => setTimeout(r, ms));

let out;
try {
  if (scenario === 'multiturn') {
    const messages = [{ role: 'user', content: `Please refund ${order}` }];
    const r1 = await call({ model, messages, maxRetries: 0 });
    messages.push(...r1.response.messages, { role: 'user', content: `are you sure? refund ${order}` });
    const r2 = await call({ model, messages, maxRetries: 0 });
    out = { ...summary([...r1.steps, ...r2.steps], r2.text, r2.totalUsage), texts: [r1.text, r2.text] };
  } else if (scenario === 'approve' || scenario === 'decline') {
    const approved = scenario === 'approve';
    const messages = [{ role: 'user', content: `isolate ${order}` }];
    const r1 = await call({ model, messages, maxRetries: 0 });
    const asks = r1.content.filter(c => c.type === 'tool-approval-request');
    if (asks.length !== 1) throw new Error(`one tool-approval-request expected, got: ${JSON.stringify(r1.content)}`);
    messages.push(...r1.response.messages, { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: asks[0].approvalId,
      approved, ...(approved ? {} : { reason: 'not now' }), providerExecuted: true }] });
    const r2 = await call({ model, messages, maxRetries: 0 });
    out = { ...summary([...r1.steps, ...r2.steps], r2.text, r2.totalUsage), texts: [r1.text, r2.text], approvals: asks.map(a => a.toolCall?.toolName ?? a.toolCallId) };
  } else if (scenario === 'onestep' || scenario === 'onestep-idle') {
    const providerOptions = { openai: { metadata: { tulip_client_timeout: '3s' } } };
    const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
    tools = { lookup_weather: lookupWeather };
    const r1 = await call({ model, messages, tools, providerOptions, maxRetries: 0 });
    out = summary(r1.steps, r1.text, r1.totalUsage);
    // The next turn: the conversation resent with "thanks", as the SDK
    // sends it, until the thread takes it.
    messages.push(...r1.response.messages, { role: 'user', content: 'thanks' });
    // onestep-idle: the user answers after the held call expired (3 s).
    if (scenario === 'onestep-idle') await sleep(4500);
    const t0 = Date.now();
    let refused = 0, finalStatus = 0, last;
    while (Date.now() - t0 < 20000) {
      try {
        const r2 = await call({ model, messages, tools, providerOptions, maxRetries: 0 });
        finalStatus = 200;
        out.texts = [r1.text, r2.text];
        break;
      } catch (e) {
        last = errorShape(e);
        finalStatus = last.status;
        if (last.status !== 409) break;
        refused++;
        await sleep(250);
      }
    }
    Object.assign(out, { refused, finalStatus, waitedMs: Date.now() - t0, ...(finalStatus === 200 ? {} : { error: last }) });
  } else {
    const g = await call(opts);
    out = summary(g.steps, g.text, g.totalUsage);
  }
} catch (e) {
  out = { ...out, error: errorShape(e) };
}
await wire.settled();
print({ ...out, calls, requests: wire.requests });
