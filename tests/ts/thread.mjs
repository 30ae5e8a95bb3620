// Drives tulip's wire protocol with the official TypeScript client, as a
// non-Go user would (docs/protocol.md): a plain start of tulip.AgentRun on
// a thread with only the documented fields, a misspelled start, and the
// tulip.log query. Prints one JSON object.
//
//   node thread.mjs ADDRESS TASK_QUEUE THREAD MODEL
import { Client, Connection } from '@temporalio/client';

const [address, taskQueue, thread, model] = process.argv.slice(2);
const connection = await Connection.connect({ address });
const client = new Client({ connection });
const out = {};

const run = await client.workflow.start('tulip.AgentRun', {
  taskQueue, workflowId: thread,
  args: [{ thread_id: thread, model, message: 'refund ord-4821 again' }],
});
out.result = await run.result();

const bad = await client.workflow.start('tulip.AgentRun', {
  taskQueue, workflowId: `${thread}-camel`,
  args: [{ threadId: thread, model }],
});
try {
  await bad.result();
  out.bad = null;
} catch (err) {
  out.bad = { type: err.cause?.type ?? null, message: err.cause?.message ?? String(err) };
}

out.log = await client.workflow.getHandle(thread).query('tulip.log');
console.log(JSON.stringify(out));
await connection.close();
