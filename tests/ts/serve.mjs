// Drives 'tulip serve' with the official OpenAI client (npm "openai"), for
// TestServeTypeScript: argv = the server's /v1 URL. It lists the models,
// streams a response (printing its events), continues it with
// previous_response_id, reads it back, and asks a chat completion; it
// prints one JSON object with what it saw.
import OpenAI from 'openai';

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });

const models = [];
for await (const m of client.models.list()) models.push(m.id);

const events = [];
const stream = await client.responses.create({ model: 'support', input: 'Please refund ord-5', stream: true });
for await (const ev of stream) events.push(ev);
const first = events.at(-1).response;

const second = await client.responses.create({
  model: 'support',
  previous_response_id: first.id,
  input: [{ role: 'user', content: 'are you sure it went through?' }],
});
const readBack = await client.responses.retrieve(second.id);

const chat = await client.chat.completions.create({
  model: 'support',
  messages: [{ role: 'user', content: 'hello there' }],
});

let unknown = null;
try {
  await client.responses.create({ model: 'nope', input: 'hi' });
} catch (err) {
  unknown = { status: err.status, code: err.code, param: err.param, type: err.type };
}

console.log(JSON.stringify({
  models,
  events: events.map((e) => ({ type: e.type, seq: e.sequence_number, delta: e.delta, item: e.item })),
  first: { id: first.id, status: first.status, text: first.output_text ?? null, output: first.output },
  second: { id: second.id, status: second.status, text: second.output_text, output: second.output },
  readBack: { id: readBack.id, status: readBack.status, text: readBack.output_text },
  chat: { content: chat.choices[0].message.content, thread: chat.tulip?.thread },
  unknown,
}));
