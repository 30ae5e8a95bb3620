// Subscribes to a tulip run's stream with Temporal's official TypeScript
// Workflow Streams client (@temporalio/workflow-streams), for
// TestStreamTypeScriptClient: argv = frontend address. It connects, prints
// "ready", reads the workflow id from stdin, subscribes, and prints one
// JSON line per item as it arrives ({topic, offset, data, at}), then
// {"end": true} when the subscription ends (the run's chain closed).
import { createRequire } from 'node:module';

// The streams client matches errors of its own @temporalio/client (1.23.0,
// installed beside it): build the Client from that copy.
const require = createRequire(import.meta.resolve('@temporalio/workflow-streams/client'));
const { Connection, Client } = require('@temporalio/client');
const { WorkflowStreamClient } = await import('@temporalio/workflow-streams/client');

const [address] = process.argv.slice(2);
const connection = await Connection.connect({ address });
try {
  console.log('ready');
  const workflowId = await new Promise((resolve) => {
    let buf = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (chunk) => {
      buf += chunk;
      if (buf.includes('\n')) {
        process.stdin.destroy();
        resolve(buf.split('\n')[0].trim());
      }
    });
  });
  const client = new Client({ connection, namespace: 'default' });
  // Each poll and how it ended, on stderr (the test shows it on failure).
  const getHandle = client.workflow.getHandle.bind(client.workflow);
  client.workflow.getHandle = (...args) => {
    const h = getHandle(...args);
    const startUpdate = h.startUpdate.bind(h);
    h.startUpdate = async (name, opts) => {
      const t0 = Date.now();
      try {
        const u = await startUpdate(name, opts);
        const result = u.result.bind(u);
        u.result = async () => {
          try {
            const r = await result();
            console.error(`${new Date().toISOString()} poll from ${opts.args[0].from_offset} on ${u.workflowRunId}: ${r.items.length} items, next ${r.next_offset} (${Date.now() - t0} ms)`);
            return r;
          } catch (e) {
            console.error(`${new Date().toISOString()} poll from ${opts.args[0].from_offset} on ${u.workflowRunId}: ${e.name} ${e.cause?.type ?? ''} ${e.message}`);
            throw e;
          }
        };
        return u;
      } catch (e) {
        console.error(`${new Date().toISOString()} poll from ${opts.args[0].from_offset} refused: ${e.name} ${e.cause?.type ?? ''} ${e.message}`);
        throw e;
      }
    };
    return h;
  };
  const stream = WorkflowStreamClient.create(client, workflowId);
  for await (const item of stream.subscribe(['tulip.calls', 'tulip.text'], 0, { resultType: true })) {
    console.log(JSON.stringify({ topic: item.topic, offset: item.offset, data: item.data, at: Date.now() }));
  }
  console.log(JSON.stringify({ end: true, at: Date.now() }));
} finally {
  await connection.close();
}
