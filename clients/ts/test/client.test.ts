// The client against `tulip dev` (TEMPORAL_ADDRESS; task queue `tulip`,
// model `support`, hooks `approve_isolate_host`, `block_page_oncall`). Run by TestTSClient
// (tests/tsclient_test.go), which starts the server.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import {
  awaitRun,
  continueThread,
  NotInterruptedError,
  QUERY_THREAD,
  resume,
  resumeBySignal,
  startRun,
  state,
  threadLog,
  ThreadBusyError,
  TulipError,
  type Checkpoint,
  type RunInput,
  type RunResult,
} from '../src/index.js';

const taskQueue = 'tulip';
let connection: Connection;
let client: Client;

before(async () => {
  connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
  client = new Client({ connection });
});

after(async () => {
  await connection?.close();
});

// Each test's bound: a hung wait fails it rather than the whole run.
const bound = { timeout: 30_000 };

const thread = (name: string) => `ts-${name}-${randomBytes(4).toString('hex')}`;

/** The run input as its history holds it (what the client sent). */
async function sentInput(workflowId: string, runId: string): Promise<RunInput> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const data = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]?.data;
  assert.ok(data, 'the start event holds the input');
  return JSON.parse(Buffer.from(data).toString('utf8')) as RunInput;
}

const outcomes = (r: RunResult) => r.trace.map((l) => `${l.tool}:${l.outcome}`);

describe('threads', () => {
  test('a thread continued twice serves the refund from its log', bound, async () => {
    const id = thread('refund');
    const first = await continueThread(client, id, { model: 'support', message: 'refund ord-77' }, { taskQueue });
    const r1 = await awaitRun(client, first);
    assert.equal(r1.status, 'completed');
    assert.deepEqual(outcomes(r1), ['issue_refund:executed']);
    assert.equal((await sentInput(id, first.runId)).previous_run_id, undefined, 'a new thread has no run before it');

    const second = await continueThread(client, id, { model: 'support', message: 'refund ord-77 again' }, { taskQueue });
    const r2 = await awaitRun(client, second);
    assert.deepEqual(outcomes(r2), ['issue_refund:cached']);
    assert.equal(r2.trace[0].served_from, 0);
    assert.equal((await sentInput(id, second.runId)).previous_run_id, first.runId, 'continueThread names the run before');

    const third = await continueThread(client, id, { model: 'support', message: 'refund ord-77, once more' }, { taskQueue });
    const r3 = await awaitRun(client, third);
    assert.deepEqual(outcomes(r3), ['issue_refund:cached']);
    assert.equal((await sentInput(id, third.runId)).previous_run_id, second.runId);

    const log = await threadLog(client, id);
    assert.deepEqual(log.map((r) => `${r.seq}:${r.tool}:${r.origin}`), ['0:issue_refund:executed', '1:issue_refund:cached', '2:issue_refund:cached']);
    assert.deepEqual(JSON.parse(log[0].arguments), { amount: 120.0, order_id: 'ord-77' });
    assert.equal((log[2].result as { refund_id: string }).refund_id, (log[0].result as { refund_id: string }).refund_id);
  });

  test('threadLog reads thin records and results held by reference in full', bound, async () => {
    const id = thread('big');
    const order = `ord-${'x'.repeat(600)}`; // a receipt over 512 bytes: its result goes by reference too
    const filler = ' .'.repeat(150_000); // a state over 256 KiB goes by reference
    const r1 = await awaitRun(client, await continueThread(client, id, { model: 'support', message: `refund ${order}${filler}` }, { taskQueue }));
    assert.deepEqual(outcomes(r1), ['issue_refund:executed']);
    const second = await continueThread(client, id, { model: 'support', message: `refund ${order}` }, { taskQueue });
    const r2 = await awaitRun(client, second);
    assert.deepEqual(outcomes(r2), ['issue_refund:cached']);

    // The state on the wire is by reference: a thin first record.
    const cp = await client.workflow.getHandle(id, second.runId).query<Checkpoint>(QUERY_THREAD);
    const held = cp.agents?.support?.records[0];
    assert.ok(held?.args_hash, 'a thin record');
    assert.equal(held?.arguments, '');
    assert.equal(held?.result, undefined);
    assert.notEqual(held?.result_in, undefined, 'its result is in a message');
    assert.ok(cp.conversation && cp.conversation.count > 0, 'the conversation goes by reference');

    const log = await threadLog(client, id);
    assert.equal(log.length, 2);
    assert.equal(log[0].args_hash, undefined);
    assert.deepEqual(JSON.parse(log[0].arguments), { amount: 120.0, order_id: order });
    assert.equal((log[0].result as { order_id: string }).order_id, order);
    assert.equal(log[0].result_in, undefined);
    assert.equal(log[1].origin, 'cached');
    assert.equal((log[1].result as { order_id: string }).order_id, order);
  });

  test('threadLog steps over a run refused before it had the thread', bound, async () => {
    const id = thread('refused');
    const first = await continueThread(client, id, { model: 'support', message: 'refund ord-5' }, { taskQueue });
    await awaitRun(client, first);
    // threadLog finds the runs before a refused one in the visibility
    // store, which lags: wait until it lists the first.
    for (let listed = false; !listed; ) {
      for await (const r of client.workflow.list({ query: `WorkflowId = "${id}"` })) listed ||= r.runId === first.runId && r.status.name === 'COMPLETED';
      if (!listed) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const bad = await startRun(client, { thread_id: id, model: 'support', maxTurns: 3 } as unknown as RunInput, { taskQueue });
    await assert.rejects(awaitRun(client, bad), (err: unknown) => err instanceof TulipError && err.type === 'tulip.BadInput');
    const log = await threadLog(client, id);
    assert.deepEqual(log.map((r) => `${r.tool}:${r.origin}`), ['issue_refund:executed']);
  });
});

describe('interrupts', () => {
  const isolate = { model: 'support', message: 'isolate web-1', hooks: ['approve_isolate_host'] };

  test('an interrupt, then a resume by update', bound, async () => {
    const id = thread('ops');
    const run = await continueThread(client, id, isolate, { taskQueue });
    const st = await awaitRun(client, run);
    assert.equal(st.status, 'interrupted');
    assert.equal(st.interrupt?.id, 'int-1');
    assert.equal(st.interrupt?.hook, 'approve_isolate_host');
    assert.deepEqual(st.interrupt?.held.map((c) => c.name), ['isolate_host']);
    assert.deepEqual(JSON.parse(st.interrupt?.held[0].arguments ?? ''), { host: 'web-1' });
    assert.equal((await state(client, run)).status, 'interrupted');

    await assert.rejects(continueThread(client, id, isolate, { taskQueue }), (err: unknown) => err instanceof ThreadBusyError && err.runId === run.runId);
    await assert.rejects(startRun(client, { ...isolate, thread_id: id }, { taskQueue }), ThreadBusyError);
    await assert.rejects(resume(client, id, { interrupt_id: 'int-9', answer: 'approved' }),
      (err: unknown) => err instanceof TulipError && err.type === 'tulip.StaleInterrupt' && !err.message.includes('\n'));
    await assert.rejects(resume(client, id, { answer: 'approved', performDangling: true } as unknown as { answer: string }),
      (err: unknown) => err instanceof TulipError && err.type === 'tulip.BadInput' && err.message.includes('"performDangling"'));

    const out = await resume(client, id, { interrupt_id: 'int-1', answer: 'approved', perform_dangling: true });
    assert.deepEqual(out, { interrupt_id: 'int-1' });
    const done = await awaitRun(client, run, { skipInterrupt: 'int-1' });
    assert.equal(done.status, 'completed');
    assert.deepEqual(outcomes(done), ['isolate_host:held', 'isolate_host:dangling']);
    assert.equal(done.summary?.dangling, 1);

    await assert.rejects(resume(client, id, { interrupt_id: 'int-1', answer: 'approved' }), NotInterruptedError);
  });

  test('a resume performs the calls held after the interrupted one through the hooks', bound, async () => {
    const id = thread('ops-hooks');
    // The page is held behind the isolation; when the resume performs it,
    // block_page_oncall cancels it (recorded as any cancel), and nothing
    // is held again.
    const run = await continueThread(client, id, { ...isolate, message: 'isolate web-3 and page incident-3', hooks: ['approve_isolate_host', 'block_page_oncall'] },
      { taskQueue });
    const st = await awaitRun(client, run);
    assert.equal(st.interrupt?.id, 'int-1');
    assert.deepEqual(st.interrupt?.held.map((c) => c.name), ['isolate_host', 'page_oncall']);
    await resume(client, id, { interrupt_id: 'int-1', answer: 'approved', perform_dangling: true });
    const done = await awaitRun(client, run, { skipInterrupt: 'int-1' });
    assert.equal(done.status, 'completed');
    assert.deepEqual(outcomes(done), ['isolate_host:held', 'page_oncall:held', 'isolate_host:dangling', 'page_oncall:cancelled']);
    assert.deepEqual(done.trace[2].arguments, { host: 'web-3' });
    assert.equal(done.trace[3].error, 'paging is disabled');
    assert.deepEqual(done.summary, { dangling: 1, cancelled: 1 });
    const log = await threadLog(client, id);
    assert.deepEqual(log.map((r) => `${r.tool}:${r.origin}`), ['page_oncall:cancelled']);
  });

  test('a run that continues as new is followed: its next interrupt, its result', bound, async () => {
    const id = thread('ops-chain');
    // One turn per workflow run: the run continues as new after each.
    const run = await continueThread(client, id, { ...isolate, continue_after_turns: 1 }, { taskQueue });
    const first = await awaitRun(client, run);
    assert.equal(first.interrupt?.id, 'int-1');
    // The answer is the next user message: the model isolates again, in
    // the run the first one continued as.
    await resume(client, id, { interrupt_id: 'int-1', answer: 'isolate web-9', perform_dangling: true });
    const second = await awaitRun(client, run, { skipInterrupt: 'int-1' });
    assert.equal(second.status, 'interrupted');
    assert.equal(second.interrupt?.id, 'int-2');
    assert.deepEqual(JSON.parse(second.interrupt?.held[0].arguments ?? ''), { host: 'web-9' });
    assert.ok((second.continued_as_new ?? 0) >= 1, 'the second interrupt is in a continued run');
    const desc = await client.workflow.getHandle(id).describe();
    assert.notEqual(desc.runId, run.runId);
    await resume(client, id, { answer: 'approved', perform_dangling: true });
    const done = await awaitRun(client, run, { skipInterrupt: 'int-2' });
    assert.equal(done.status, 'completed');
    assert.deepEqual(outcomes(done), ['isolate_host:held', 'isolate_host:dangling', 'isolate_host:held', 'isolate_host:dangling']);
  });

  test('an interrupt, then a resume by signal', bound, async () => {
    const id = thread('ops-signal');
    const run = await continueThread(client, id, isolate, { taskQueue });
    const st = await awaitRun(client, run);
    assert.equal(st.interrupt?.id, 'int-1');
    await resumeBySignal(client, id, { interrupt_id: 'int-1', answer: 'not now' });
    const done = await awaitRun(client, run, { skipInterrupt: 'int-1' });
    assert.deepEqual(outcomes(done), ['isolate_host:held', 'isolate_host:dropped']);
    await assert.rejects(resumeBySignal(client, id, { interrupt_id: '', answer: 'x' }), TypeError);
  });
});

describe('failures', () => {
  test('a misspelled field fails the run with tulip.BadInput naming every unknown field', bound, async () => {
    const run = await startRun(client, { model: 'support', threadId: 'x', maxTurns: 3 } as unknown as RunInput, { taskQueue });
    const err = await awaitRun(client, run).then(() => assert.fail('the run completed'), (e: unknown) => e);
    assert.ok(err instanceof TulipError, String(err));
    assert.equal(err.type, 'tulip.BadInput');
    assert.equal(err.message, 'agent run failed (tulip.BadInput): run input: unknown fields "maxTurns" (did you mean "max_turns"?), "threadId" (did you mean "thread_id"?)');
    assert.equal(err.details?.status, 'failed');
    assert.deepEqual(err.details?.trace, []);
  });

  test('a run that reaches max_turns fails with its trace in the details', bound, async () => {
    const run = await continueThread(client, thread('turns'), { model: 'support', message: 'refund ord-6', max_turns: 1 }, { taskQueue });
    const err = await awaitRun(client, run).then(() => assert.fail('the run completed'), (e: unknown) => e);
    assert.ok(err instanceof TulipError, String(err));
    assert.equal(err.type, 'tulip.MaxTurnsExceeded');
    assert.deepEqual(err.details && outcomes(err.details), ['issue_refund:executed']);
    assert.ok(err.details?.state, 'the thread keeps what the run recorded');
  });
});
