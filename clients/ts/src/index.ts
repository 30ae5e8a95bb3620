// A typed client of tulip's wire protocol (docs/protocol.md) over the
// official @temporalio/client: start and continue agent runs, wait for
// their result or their interrupt, resume them, and read a thread's
// execution log, with failures mapped to tulip's stable error types.
import {
  ApplicationFailure,
  CancelledFailure,
  Client,
  TerminatedFailure,
  TimeoutFailure,
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
} from '@temporalio/client';
import { randomBytes } from 'node:crypto';
import type {
  Checkpoint,
  LogRecord,
  Message,
  Page,
  PageRequest,
  ResumeInput,
  ResumeResult,
  RunInput,
  RunResult,
} from './protocol.js';

export type * from './protocol.js';

/** The workflow type of an agent run. */
export const WORKFLOW_TYPE = 'tulip.AgentRun';
/** The queries, updates, signals and memo key of docs/protocol.md. */
export const QUERY_STATE = 'tulip.state';
export const QUERY_LOG = 'tulip.log';
export const QUERY_THREAD = 'tulip.thread';
export const QUERY_PAGE = 'tulip.page';
export const UPDATE_RESUME = 'tulip.resume';
export const SIGNAL_RESUME = 'tulip.resume';
export const MEMO_INTERRUPT = 'tulip_interrupt';
/** The agent whose log a run keeps when its input names none. */
export const DEFAULT_AGENT = 'support';

/**
 * A failure with one of tulip's stable types (docs/protocol.md, "Results
 * and failures"): `type` is the ApplicationFailure's type (`tulip.BadInput`,
 * `tulip.MaxTurnsExceeded`, `tulip.StaleInterrupt`, ...; `''` for a run
 * that was terminated, timed out or cancelled), `details` the RunResult so
 * far that a failed run carries. The message is one line.
 */
export class TulipError extends Error {
  readonly type: string;
  readonly details?: RunResult;

  constructor(type: string, message: string, details?: RunResult, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TulipError';
    this.type = type;
    this.details = details;
  }
}

/** A resume with nothing to resume: the run is closed, or not interrupted (`tulip.NotInterrupted`). */
export class NotInterruptedError extends TulipError {
  readonly workflowId: string;

  constructor(workflowId: string, message?: string, options?: { cause?: unknown }) {
    super('tulip.NotInterrupted', message ?? `run "${workflowId}" is closed: there is nothing to resume`, undefined, options);
    this.name = 'NotInterruptedError';
    this.workflowId = workflowId;
  }
}

/** A run is already open on the thread: resume or finish it first. */
export class ThreadBusyError extends Error {
  readonly threadId: string;
  readonly runId: string;

  constructor(threadId: string, runId: string, options?: { cause?: unknown }) {
    super(`thread "${threadId}" already has an open run (${runId}); resume or finish it first`, options);
    this.name = 'ThreadBusyError';
    this.threadId = threadId;
    this.runId = runId;
  }
}

/** A started run: its workflow ID and the run ID its chain started with. */
export interface RunHandle {
  workflowId: string;
  runId: string;
}

export interface StartOptions {
  /** The task queue tulip's workers poll (`tulip dev`'s is `tulip`). */
  taskQueue: string;
  /** The workflow ID of a run without a thread; default `tulip-run-` and a random suffix. A run on a thread uses the thread ID. */
  workflowId?: string;
}

/**
 * Starts a run with exactly this input, and returns at once. A run on a
 * thread (`thread_id`) is started with workflow ID = thread ID; without
 * `previous_run_id` the run waits out the worker's visibility lag (2 s by
 * default) before it looks for the thread's runs: use continueThread to
 * skip that wait. A run already open on the thread: ThreadBusyError.
 */
export async function startRun(client: Client, input: RunInput, options: StartOptions): Promise<RunHandle> {
  const workflowId = input.thread_id || options.workflowId || `tulip-run-${randomSuffix()}`;
  try {
    const handle = await client.workflow.start(WORKFLOW_TYPE, {
      taskQueue: options.taskQueue,
      workflowId,
      args: [input],
      workflowIdConflictPolicy: 'FAIL',
      // new_thread is true only when the thread has no run: the server
      // then refuses the start if one appeared since the describe.
      workflowIdReusePolicy: input.new_thread ? 'REJECT_DUPLICATE' : 'ALLOW_DUPLICATE',
    });
    return { workflowId, runId: handle.firstExecutionRunId };
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      const desc = await client.workflow.getHandle(workflowId).describe().catch(() => undefined);
      throw new ThreadBusyError(workflowId, desc?.runId ?? '', { cause: err });
    }
    throw err;
  }
}

/**
 * Starts a run on a thread (its first or a later one): it describes the
 * thread's workflow ID first and passes its current run as
 * `previous_run_id`, or, when there is none, starts it as a new thread
 * (`new_thread`, with the reuse policy REJECT_DUPLICATE), so the run never
 * waits for the visibility store. A run already open on the thread:
 * ThreadBusyError.
 */
export async function continueThread(
  client: Client,
  threadId: string,
  input: Omit<RunInput, 'thread_id' | 'previous_run_id' | 'new_thread'>,
  options: Omit<StartOptions, 'workflowId'>,
  again = true,
): Promise<RunHandle> {
  const full: RunInput = { ...input, thread_id: threadId };
  try {
    const desc = await client.workflow.getHandle(threadId).describe();
    if (desc.status.name === 'RUNNING') throw new ThreadBusyError(threadId, desc.runId);
    full.previous_run_id = desc.runId;
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    full.new_thread = true; // a new thread: no run before it
  }
  try {
    return await startRun(client, full, options);
  } catch (err) {
    // A run appeared between the describe and the start: describe again.
    if (full.new_thread && again && err instanceof ThreadBusyError) return continueThread(client, threadId, input, options, false);
    throw err;
  }
}

export interface AwaitOptions {
  /** An interrupt already handled: wait past it (for its resume) rather than report it again. */
  skipInterrupt?: string;
  /** How soon to first describe the run for the interrupt memo; default 100 ms. Each later describe waits twice as long, up to `maxPollIntervalMs`. */
  pollIntervalMs?: number;
  /** The longest wait between describes: an interrupt is seen at most this long after it is durable; default 1000 ms. */
  maxPollIntervalMs?: number;
}

/**
 * Waits until the run completes, or is interrupted (by an interrupt other
 * than `skipInterrupt`): it returns the RunResult (`status` `completed`,
 * or `interrupted` with `interrupt.held`). It follows continue-as-new. An
 * interrupt is reported once the `tulip_interrupt` memo names it (the
 * workflow task that reached it completed, so a resume will find it), with
 * the held calls read by the `tulip.state` query. A failed run throws
 * TulipError (its `type` and `details`).
 */
export async function awaitRun(client: Client, run: RunHandle, options: AwaitOptions = {}): Promise<RunResult> {
  const stop = new AbortController();
  const result = client
    .withAbortSignal(stop.signal, () => client.workflow.getHandle(run.workflowId, run.runId, { followRuns: true }).result())
    .then((r) => r as RunResult, (err) => Promise.reject(runError(err)));
  const interrupted = pollInterrupt(client, run, options, stop.signal);
  try {
    return await Promise.race([result, interrupted]);
  } finally {
    stop.abort();
    result.catch(() => {});
    interrupted.catch(() => {});
  }
}

async function pollInterrupt(client: Client, run: RunHandle, options: AwaitOptions, signal: AbortSignal): Promise<RunResult> {
  let every = options.pollIntervalMs ?? 100;
  const most = Math.max(options.maxPollIntervalMs ?? 1000, every);
  for (;;) {
    await sleep(every, signal);
    every = Math.min(2 * every, most);
    try {
      const { runId, memo } = await currentRun(client, run);
      const id = memo?.[MEMO_INTERRUPT];
      if (typeof id !== 'string' || id === '' || id === options.skipInterrupt) continue;
      const st = await client.workflow.getHandle(run.workflowId, runId).query<RunResult>(QUERY_STATE);
      if (st.status === 'interrupted' && st.interrupt?.id === id) return st;
    } catch (err) {
      if (signal.aborted) throw err;
      // Not there yet (a query before the first workflow task, say): the
      // next poll, or the result, decides.
    }
  }
}

/** The newest run of the handle's continue-as-new chain, and its memo. */
async function currentRun(client: Client, run: RunHandle): Promise<{ runId: string; memo?: Record<string, unknown> }> {
  const desc = await client.workflow.getHandle(run.workflowId).describe();
  if (desc.raw.workflowExecutionInfo?.firstRunId === run.runId || desc.runId === run.runId) {
    return { runId: desc.runId, memo: desc.memo };
  }
  const own = await client.workflow.getHandle(run.workflowId, run.runId).describe();
  return { runId: own.runId, memo: own.memo };
}

/** The run's state so far (the `tulip.state` query on the newest run of its chain). */
export async function state(client: Client, run: RunHandle): Promise<RunResult> {
  const { runId } = await currentRun(client, run);
  return client.workflow.getHandle(run.workflowId, runId).query<RunResult>(QUERY_STATE);
}

/**
 * Answers the run's interrupt by update. Refusals are TulipErrors:
 * `tulip.StaleInterrupt` (an old interrupt id), `tulip.BadInput`; a run
 * that is closed or not interrupted: NotInterruptedError. A resume for an
 * interrupt already answered does nothing (`duplicate: true`).
 */
export async function resume(client: Client, workflowId: string, input: ResumeInput): Promise<ResumeResult> {
  const handle = client.workflow.getHandle(workflowId);
  const desc = await handle.describe();
  if (desc.status.name !== 'RUNNING') throw new NotInterruptedError(workflowId);
  try {
    return await handle.executeUpdate<ResumeResult, [ResumeInput]>(UPDATE_RESUME, { args: [input] });
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new NotInterruptedError(workflowId, undefined, { cause: err });
    if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure) {
      const type = err.cause.type ?? '';
      const message = `${UPDATE_RESUME} refused (${type}): ${err.cause.message}`;
      if (type === 'tulip.NotInterrupted') throw new NotInterruptedError(workflowId, message, { cause: err });
      throw new TulipError(type, message, undefined, { cause: err });
    }
    throw err;
  }
}

/**
 * Sends the same resume as a signal, for callers that cannot send
 * updates. It must name its interrupt; a signal cannot answer, so an
 * invalid one is dropped by the run (logged by its worker).
 */
export async function resumeBySignal(client: Client, workflowId: string, input: ResumeInput & { interrupt_id: string }): Promise<void> {
  if (!input.interrupt_id) throw new TypeError('a resume signal must name its interrupt (interrupt_id)');
  try {
    await client.workflow.getHandle(workflowId).signal<[ResumeInput]>(SIGNAL_RESUME, input);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new NotInterruptedError(workflowId, undefined, { cause: err });
    throw err;
  }
}

/** One page of what a run holds (the `tulip.page` query): items in full, or `holder`, the run to ask. */
export async function readPage(client: Client, workflowId: string, runId: string, req: PageRequest): Promise<Page> {
  return client.workflow.getHandle(workflowId, runId).query<Page, [PageRequest]>(QUERY_PAGE, req);
}

/**
 * Items [from, to) of a kind as run `runId` of `workflowId` holds or refers
 * to them, each read in full from the run that holds it (following
 * `holder`).
 */
async function fetchItems<T>(
  client: Client,
  workflowId: string,
  runId: string,
  req: Omit<PageRequest, 'from' | 'to'>,
  from: number,
  to: number,
  items: (p: Page) => T[] | undefined,
): Promise<T[]> {
  const out: T[] = [];
  while (from < to) {
    const page = await readPage(client, workflowId, runId, { ...req, from, to });
    if (page.next <= from || page.next > to) {
      throw new Error(`run ${runId} of ${workflowId} answered ${req.kind} [${from}, ${to}) with a page ending at ${page.next}`);
    }
    if (page.holder) {
      if (page.holder === runId) throw new Error(`run ${runId} of ${workflowId} names itself as the holder of its ${req.kind}`);
      out.push(...(await fetchItems(client, workflowId, page.holder, req, from, page.next, items)));
    } else {
      const got = items(page) ?? [];
      if (got.length !== page.next - from) {
        throw new Error(`run ${runId} of ${workflowId} answered ${got.length} ${req.kind} for [${from}, ${page.next})`);
      }
      out.push(...got);
    }
    from = page.next;
  }
  return out;
}

/** Messages [from, to) of the conversation a run holds or refers to. */
export function fetchMessages(client: Client, workflowId: string, runId: string, from: number, to: number): Promise<Message[]> {
  return fetchItems(client, workflowId, runId, { kind: 'messages' }, from, to, (p) => p.messages);
}

/** Records [from, to) of an agent's log as a run holds or refers to them, each in full. */
export function fetchRecords(
  client: Client,
  workflowId: string,
  runId: string,
  agent: string,
  from: number,
  to: number,
): Promise<LogRecord[]> {
  return fetchItems(client, workflowId, runId, { kind: 'records', agent }, from, to, (p) => p.records);
}

/**
 * Reads single messages of a thread's conversation as a state holds it:
 * the messages it holds in full, the others from the runs that hold them.
 */
class MessageReader {
  private readonly cache = new Map<number, string>();

  constructor(
    private readonly client: Client,
    private readonly threadId: string,
    private readonly cp: Checkpoint,
  ) {}

  /** The content of message i (following `content_in`). */
  async content(i: number): Promise<string> {
    const have = this.cache.get(i);
    if (have !== undefined) return have;
    const base = this.cp.conversation?.count ?? 0;
    const m = i >= base && this.cp.messages?.[i - base]
      ? this.cp.messages[i - base]
      : (await fetchMessages(this.client, this.threadId, this.cp.run ?? '', i, i + 1))[0];
    let content = m?.content ?? '';
    if (m?.content_in !== undefined) {
      if (m.content_in >= i) throw new Error(`message ${i} refers to message ${m.content_in}, which does not come before it`);
      content = await this.content(m.content_in);
    }
    this.cache.set(i, content);
    return content;
  }
}

/**
 * The thread's state as its newest run holds it: the open run's
 * `tulip.thread` answer, or what the thread's next run would load (a
 * completed run's `state`, a failed run's in its failure details, any
 * other run's `tulip.thread` answer; runs that left nothing are stepped
 * over). `undefined` for a thread with no state yet.
 */
export async function threadState(client: Client, threadId: string): Promise<Checkpoint | undefined> {
  const desc = await client.workflow.getHandle(threadId).describe();
  if (desc.status.name === 'RUNNING') {
    const cp = await client.workflow.getHandle(threadId, desc.runId).query<Checkpoint>(QUERY_THREAD);
    return cp.agents === null ? undefined : { ...cp, run: cp.run || desc.runId };
  }
  const left = await stateLeftBy(client, threadId, desc.runId);
  if (left.ran) return left.state;
  // The newest run left nothing (a refused input): the runs before it,
  // newest first, from the visibility store.
  const runs: { runId: string; start: number }[] = [];
  for await (const r of client.workflow.list({ query: `WorkflowId = ${JSON.stringify(threadId)}` })) {
    if (r.runId !== desc.runId) runs.push({ runId: r.runId, start: r.startTime.getTime() });
  }
  runs.sort((a, b) => b.start - a.start);
  for (const r of runs) {
    const left = await stateLeftBy(client, threadId, r.runId);
    if (left.ran) return left.state;
  }
  return undefined;
}

/** The state a closed run left behind; ran is false when it left nothing. */
async function stateLeftBy(client: Client, threadId: string, runId: string): Promise<{ ran: boolean; state?: Checkpoint }> {
  const handle = client.workflow.getHandle(threadId, runId, { followRuns: false });
  const desc = await handle.describe();
  const status = desc.status.name;
  if (status === 'COMPLETED' || status === 'FAILED') {
    let out: RunResult | undefined;
    try {
      out = (await handle.result()) as RunResult;
    } catch (err) {
      if (err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure && err.cause.details?.length) {
        out = err.cause.details[0] as RunResult;
        // Details with no state: a run refused before it had its thread's state.
        if (!out.state && !out.checkpoint) return { ran: false };
      }
    }
    const st = out?.state ?? out?.checkpoint;
    if (st) return { ran: true, state: { ...st, run: st.run || runId } };
  }
  // Terminated, timed out, cancelled, or failed without details: the run's
  // history says what it recorded, if it completed a workflow task.
  const history = await handle.fetchHistory();
  if (!history.events?.some((e) => e.workflowTaskCompletedEventAttributes)) return { ran: false };
  const cp = await handle.query<Checkpoint>(QUERY_THREAD);
  if (cp.agents === null) return { ran: false };
  return { ran: true, state: { ...cp, run: cp.run || runId } };
}

/**
 * The execution log `agent` left on a thread, every record in full, as
 * the thread's next run would load it: thin records (`args_hash`, no
 * `arguments`) read from the runs that hold them (`tulip.page`, kind
 * records), and results left out (`result_in`) read from the thread's
 * conversation (kind messages).
 */
export async function threadLog(client: Client, threadId: string, agent: string = DEFAULT_AGENT): Promise<LogRecord[]> {
  const cp = await threadState(client, threadId);
  const snap = cp?.agents?.[agent];
  if (!cp || !snap) return [];
  const run = cp.run ?? '';
  const recs = snap.records.map((r) => ({ ...r }));
  let thin = 0;
  while (thin < recs.length && recs[thin].args_hash && recs[thin].arguments === '') thin++;
  if (thin > 0) {
    const full = await fetchRecords(client, threadId, run, agent, 0, thin);
    recs.splice(0, thin, ...full.map((r) => ({ ...r })));
  }
  const msgs = new MessageReader(client, threadId, cp);
  for (const r of recs) {
    if (r.result === undefined && r.result_in !== undefined) {
      r.result = parseJSON(await msgs.content(r.result_in));
      delete r.result_in;
    }
  }
  return recs;
}

function parseJSON(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Maps a run's failure to a TulipError: its type, one-line message and details. */
function runError(err: unknown): unknown {
  if (!(err instanceof WorkflowFailedError)) return err;
  const cause = err.cause;
  if (cause instanceof ApplicationFailure) {
    const type = cause.type ?? '';
    const details = cause.details?.[0] as RunResult | undefined;
    return new TulipError(type, `agent run failed (${type}): ${cause.message}`, details, { cause: err });
  }
  if (cause instanceof TerminatedFailure) return new TulipError('', 'agent run was terminated', undefined, { cause: err });
  if (cause instanceof TimeoutFailure) return new TulipError('', 'agent run timed out', undefined, { cause: err });
  if (cause instanceof CancelledFailure) return new TulipError('', 'agent run was cancelled', undefined, { cause: err });
  return new TulipError('', `agent run failed: ${err.message}`, undefined, { cause: err });
}

function randomSuffix(): string {
  return randomBytes(8).toString('hex');
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
