/* Generated from docs/schemas by scripts/gen-types.mjs (json-schema-to-typescript): do not edit.
 * Regenerate with: npm run gen */

/**
 * One item of a run's tulip.calls stream topic: a tool-call decision as the workflow made it, in the order of the trace (a held call has a second item once a resume settles it). Items carry no arguments or results unless the run's stream.content asks for them.
 */
export interface CallItem {
  turn: number;
  call_id: string;
  tool: string;
  /**
   * As a trace line's outcome.
   */
  outcome: 'executed' | 'cached' | 'cancelled' | 'held' | 'dangling' | 'dropped' | 'rejected';
  /**
   * The log record a cached call was served from.
   */
  served_from?: number;
  relation?: 'earlier_turn' | 'same_response' | 'origin';
  /**
   * On a call a sub-agent made: its agent path (support/refunds), published by the parent when the sub-agent's call returns, before the parent's own item for that call.
   */
  agent?: string;
  /**
   * The first 16 hex digits of the SHA-256 of the call's downstream key (the key itself is not streamed).
   */
  key_hash?: string;
  /**
   * The outcome is an error (the tool failed, or the call was refused).
   */
  failed?: boolean;
  /**
   * As a trace line's near_miss, without values: the nearest record, the reason, the JSON Pointers that differ.
   */
  near_miss?: {
    record: number;
    reason: 'arguments' | 'not_idempotent' | 'after_resume' | 'same_response' | 'hook';
    paths?: string[];
  };
  /**
   * With stream.content: the arguments compared for dedup, unless over 16 KiB (then cut_bytes).
   */
  arguments?: {
    [k: string]: unknown;
  };
  /**
   * With stream.content: the tool's JSON result, unless over 16 KiB (then cut_bytes).
   */
  result?: unknown;
  /**
   * With stream.content: the error text of a failed call.
   */
  error?: string;
  /**
   * With stream.content: the size of the arguments or result left out for being over 16 KiB.
   */
  cut_bytes?: number;
}

/**
 * A thread's state: its conversation and each agent's log (a dedup snapshot). The tulip.thread query's answer, a thread run's result's state, a continued run's carried state. Runs write it by reference: conversation names the runs that hold its first messages, records are thin (arguments as a hash, large results as a message number); messages then holds only what follows, in full. States written before by-reference runs (and by custom Checkpointers) hold everything in messages and full records.
 */
export interface Checkpoint {
  /**
   * Each agent's log, by agent name. null in the tulip.thread answer of a run that stopped before it had its thread's state (a refused input): that run left nothing, and a reader steps over it to the run before.
   */
  agents: {
    [k: string]: {
      /**
       * 1: full records only; 2: thin records first (held by other runs), then full ones.
       */
      version: 1 | 2;
      responses: number;
      records: LogRecord[];
    };
  } | null;
  /**
   * The conversation in full: all of it, or the messages after conversation's.
   */
  messages?: Message[];
  /**
   * The conversation's first count messages, by reference.
   */
  conversation?: {
    count: number;
    /**
     * SHA-256 chain over the messages: d_n = hex(SHA-256(d_{n-1} || SHA-256(JSON(message_n)))), d_0 = "".
     */
    digest: string;
    parts: {
      /**
       * The run (same workflow ID) that holds messages [from, to): page them with tulip.page.
       */
      run: string;
      from: number;
      to: number;
    }[];
  };
  /**
   * The run whose state this is.
   */
  run?: string;
  /**
   * The thread's token counts through this state: every model response of every run and agent on it. Absent when none reported any, and in states written before it (counted from then on).
   */
  usage?: {
    prompt_tokens: number;
    completion_tokens: number;
    cached_tokens?: number;
    [k: string]: unknown;
  };
  /**
   * usage per model: the name the runs asked their worker for (the run input's model).
   */
  usage_by_model?: {
    [k: string]: {
      prompt_tokens: number;
      completion_tokens: number;
      cached_tokens?: number;
      [k: string]: unknown;
    };
  };
  /**
   * Per agent, where the count in its next downstream key of a tool that is not idempotent starts: past every count its runs on the thread used, executions no record holds included (held calls a resume performed, calls executing when a run stopped). Absent for an agent whose log's length is past them already (and in states written before it): the count then starts at the log's length.
   */
  minted?: {
    [k: string]: number;
  };
  /**
   * On a thread made by a fork (docs/forks.md): the thread it was forked from, and the model response (1-based) the fork replaced. Absent on any other thread.
   */
  fork?: {
    thread: string;
    at: number;
    /**
     * The fork runs the calls its origin never made; absent, a later run on the fork's thread holds them too.
     */
    live?: boolean;
    [k: string]: unknown;
  };
  /**
   * The model's view of the conversation (docs/context.md): the summary sent in place of its first upto messages, and the last model call's measure (sent tokens of a budget, when the conversation had at messages). The conversation itself stays whole. Absent while nothing was compacted nor measured.
   */
  context?: {
    upto?: number;
    summary?: string;
    budget?: number;
    sent?: number;
    at?: number;
    compactions?: number;
  };
  /**
   * Per agent, the held calls a resume performed (approved). They ran, and no record of the log holds them (docs/rules.md); a fork of the thread serves them as it serves the log's records (docs/forks.md). Absent when there are none, and in states written before it.
   */
  performed?: {
    [k: string]: {
      /**
       * The model response (1-based, across the thread) that made the call.
       */
      response: number;
      call_id: string;
      tool: string;
      /**
       * The arguments it ran with, after the hooks.
       */
      arguments: string;
      /**
       * Its tool message's number in the conversation (from 0): its result, or its error.
       */
      message: number;
      error?: {
        type: string;
        message: string;
      };
      /**
       * The downstream idempotency key it ran with.
       */
      key?: string;
    }[];
  };
}

/**
 * The tulip.hooks update's (and signal's) argument.
 */
export interface HooksInput {
  install?: string[];
  remove?: string[];
}

export interface Interrupt {
  /**
   * Answer it by this id (int-1, int-2, ...).
   */
  id: string;
  turn: number;
  hook: string;
  reason: string;
  held: ToolCall[];
  /**
   * On an interrupt a sub-agent raised: the agent path of the run that holds the calls (support/refunds); this run's resume answers it. Absent for the run's own.
   */
  agent?: string;
}

export interface Message {
  role: 'user' | 'assistant' | 'tool';
  content?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  /**
   * A tool result served from the log: the body did not run for this call.
   */
  served?: boolean;
  /**
   * A served tool message whose content is that of this earlier message of the conversation (a result another run holds).
   */
  content_in?: number;
}

/**
 * On a call whose body ran although its tool already had records in the agent's log: the nearest record and why it did not serve the call (docs/rules.md, Why did it run again?). Absent when the tool had no earlier record.
 */
export interface NearMiss {
  /**
   * The nearest record's seq.
   */
  record: number;
  /**
   * The nearest record's call.
   */
  call_id: string;
  /**
   * arguments: the values differ from every record of the tool (differences says where, against the nearest); not_idempotent: a record with equal arguments exists but the tool is not idempotent; after_resume: a record with equal arguments exists but the run was resumed by a person's answer to a hook's interrupt (or the call was held and performed), which turns matching off; same_response: an earlier call of the same response has equal values but another sorted-key JSON (120 and 120.0); hook: the call as the model sent it equals the record, but a hook rewrote it.
   */
  reason: 'arguments' | 'not_idempotent' | 'after_resume' | 'same_response' | 'hook';
  /**
   * For arguments and hook: the first places the arguments differ by the value model (120 and 120.0 never do). Empty when the nearest record is thin (its values are held by another run).
   *
   * @maxItems 3
   */
  differences?:
    | []
    | [
        {
          /**
           * A JSON Pointer (RFC 6901) into the arguments.
           */
          path: string;
          /**
           * The record's value; absent when the record lacks the member. A value over 256 bytes is a string that begins it and says its length.
           */
          was?: unknown;
          /**
           * The call's value; absent when the call lacks the member.
           */
          now?: unknown;
        }
      ]
    | [
        {
          /**
           * A JSON Pointer (RFC 6901) into the arguments.
           */
          path: string;
          /**
           * The record's value; absent when the record lacks the member. A value over 256 bytes is a string that begins it and says its length.
           */
          was?: unknown;
          /**
           * The call's value; absent when the call lacks the member.
           */
          now?: unknown;
        },
        {
          /**
           * A JSON Pointer (RFC 6901) into the arguments.
           */
          path: string;
          /**
           * The record's value; absent when the record lacks the member. A value over 256 bytes is a string that begins it and says its length.
           */
          was?: unknown;
          /**
           * The call's value; absent when the call lacks the member.
           */
          now?: unknown;
        }
      ]
    | [
        {
          /**
           * A JSON Pointer (RFC 6901) into the arguments.
           */
          path: string;
          /**
           * The record's value; absent when the record lacks the member. A value over 256 bytes is a string that begins it and says its length.
           */
          was?: unknown;
          /**
           * The call's value; absent when the call lacks the member.
           */
          now?: unknown;
        },
        {
          /**
           * A JSON Pointer (RFC 6901) into the arguments.
           */
          path: string;
          /**
           * The record's value; absent when the record lacks the member. A value over 256 bytes is a string that begins it and says its length.
           */
          was?: unknown;
          /**
           * The call's value; absent when the call lacks the member.
           */
          now?: unknown;
        },
        {
          /**
           * A JSON Pointer (RFC 6901) into the arguments.
           */
          path: string;
          /**
           * The record's value; absent when the record lacks the member. A value over 256 bytes is a string that begins it and says its length.
           */
          was?: unknown;
          /**
           * The call's value; absent when the call lacks the member.
           */
          now?: unknown;
        }
      ];
  /**
   * How many values differ in all (differences lists at most 3).
   */
  distance?: number;
}

/**
 * The tulip.page query's argument.
 */
export interface PageRequest {
  kind: 'messages' | 'records' | 'trace';
  /**
   * Whose log (kind records); default the run's agent.
   */
  agent?: string;
  from: number;
  /**
   * Exclusive; 0 or past the end: the end.
   */
  to?: number;
}

/**
 * The tulip.page query's answer: items [from, next) in full, or none and holder: the run (same workflow ID) that holds them, to be asked the same. From past the end: an empty page with next = total.
 */
export interface Page {
  from: number;
  next: number;
  /**
   * How many items of the kind the run has.
   */
  total: number;
  holder?: string;
  messages?: Message[];
  records?: LogRecord[];
  trace?: TraceLine[];
}

/**
 * One entry of an execution log (the tulip.log query answers an array of them).
 */
export interface LogRecord {
  seq: number;
  tool: string;
  /**
   * The argument text compared for dedup, exactly: use it where JSON numbers must stay exact. "" in a thin record (see args_hash).
   */
  arguments: string;
  response: number;
  run?: string;
  turn: number;
  call_id: string;
  /**
   * How the record came to be: the body ran (executed), an earlier record's outcome was served from the log (cached: the trace's word; records written before say served, read as cached), or a hook cancelled the call.
   */
  origin: 'executed' | 'cached' | 'served' | 'cancelled';
  /**
   * The body's JSON result.
   */
  result?: unknown;
  error?: {
    type: string;
    /**
     * At most 4 KiB: a longer message is cut and says its length.
     */
    message: string;
  };
  served_from?: number;
  relation?: 'earlier_turn' | 'same_response' | 'origin';
  key?: string;
  /**
   * A thin record's arguments as hex SHA-256 of their value-equality encoding; its holder (or run) holds the record in full.
   */
  args_hash?: string;
  /**
   * The run (same workflow ID) that holds a thin record in full, when it is not run: page it with tulip.page (kind records).
   */
  holder?: string;
  /**
   * The result is the content of this message of the thread's conversation (a result too large to carry, or served from one).
   */
  result_in?: number;
  near_miss?: NearMiss;
  /**
   * As on the call's trace line: an attempt's outcome was unknown (its worker lost, or an ambiguous error) and how the run resolved it (docs/unknown.md). A thin record leaves it out.
   */
  unknown?: {
    /**
     * Why the outcome was unknown, the first time.
     */
    cause: string;
    /**
     * How many times the tool's check asked the service.
     */
    checks: number;
    /**
     * How many times the call ran again, with the same key, after a check found it not applied.
     */
    retries?: number;
    /**
     * applied: a check found the execution applied and its answer is the outcome; retried: the call ran again (after a check or an approval) and the line's outcome is that run's; answered: a person's result (a resume's) is the outcome; not_applied: the check found it not applied and no execution was left (the line's error says so); unresolved: still unknown, the line's error says why (tulip.OutcomeUnknown).
     */
    resolution: 'applied' | 'retried' | 'answered' | 'not_applied' | 'unresolved';
    /**
     * How many times the run was interrupted (hook tulip.unknown) for a person to answer.
     */
    holds?: number;
  };
}

/**
 * The tulip.resume update's (and signal's) argument. Unknown fields are refused (update) or dropped whole (signal).
 */
export interface ResumeInput {
  /**
   * The interrupt answered; required by signal, optional by update (the current one).
   */
  interrupt_id?: string;
  /**
   * Given to the model as a user message (for hook tulip.unknown: joins the call's error when it is not run again).
   */
  answer: string;
  /**
   * Run the held calls (unmatched, unrecorded); for hook tulip.unknown, run the held call again with the same key (recorded as the call).
   */
  perform_dangling?: boolean;
  /**
   * Answers an interrupt of hook client_tools: one result for each held call (no answer, no perform_dangling). Each is recorded as its call's outcome and is the tool message the model reads. An interrupt of hook tulip.unknown takes one, for its held call (what happened), or none. Any other interrupt takes none.
   */
  results?: {
    /**
     * A held call's id.
     */
    call_id: string;
    /**
     * What the tool returned: JSON text is the result as that JSON value, any other text a JSON string.
     */
    output: string;
    /**
     * The output is the call's error message (recorded with type tulip.ClientToolError).
     */
    is_error?: boolean;
  }[];
}

export interface ResumeResult {
  interrupt_id: string;
  /**
   * This interrupt was already answered: nothing happened.
   */
  duplicate?: boolean;
}

/**
 * The input of tulip.AgentRun (the first argument). Unknown fields fail the run with tulip.BadInput.
 */
export interface RunInput {
  /**
   * The agent's name; logs are per agent. Default "support".
   */
  agent?: string;
  /**
   * Continue this thread. Start the run with workflow ID = thread_id.
   */
  thread_id?: string;
  /**
   * Optional hint: the thread's last closed run.
   */
  previous_run_id?: string;
  /**
   * The thread has no earlier run: set only when a describe of the workflow ID found none and this run was started with the reuse policy REJECT_DUPLICATE (the server then guarantees it). The run loads nothing and does not wait out the visibility lag; set otherwise, a thread that had runs would start empty.
   */
  new_thread?: boolean;
  /**
   * The user's message.
   */
  message?: string;
  /**
   * A model registered on the worker.
   */
  model: string;
  /**
   * Hooks installed at start, in order.
   */
  hooks?: string[];
  /**
   * The run plays in the SDK's test environment (agent.RunTest), which has no server: a sub-agent's thread starts new, and a thread with runs is refused.
   */
  test_env?: boolean;
  /**
   * The run never compacts its model's view of the conversation (docs/context.md): a call over the model's budget fails the run with tulip.ContextTooLong.
   */
  no_compaction?: boolean;
  /**
   * The worker's tools the run is offered: tool names and toolset names (every tool of that toolset). A name the worker does not have fails the run at its start. Absent: every tool of the worker; a sub-agent is never offered itself.
   */
  tools?: string[];
  /**
   * Model turns allowed across continue-as-new. Default 32.
   */
  max_turns?: number;
  /**
   * Continue as new after this many turns in one workflow run. Default 250.
   */
  continue_after_turns?: number;
  /**
   * Continue as new once history is this large. Default 8 MiB.
   */
  continue_after_bytes?: number;
  limits?: {
    /**
     * Deepest nesting of argument objects. Default 64.
     */
    MaxDepth?: number;
    /**
     * Longest argument text. Default 256 KiB.
     */
    MaxBytes?: number;
  };
  /**
   * Run the calls of one response one after another.
   */
  sequential_calls?: boolean;
  /**
   * What the run streams on Temporal's Workflow Streams (docs/protocol.md, Live runs). Absent: every decision on tulip.calls and each answer whole on tulip.text, published by the workflow (no history event).
   */
  stream?: {
    /**
     * No stream: no handlers, no items.
     */
    off?: boolean;
    /**
     * Stream the model's answer as it is generated (pieces sent by the model activity by signal: one event per batch).
     */
    text?: boolean;
    /**
     * Interval of those batches, in milliseconds. Default 300.
     */
    batch_ms?: number;
    /**
     * Add each call's arguments and result (or error) to its tulip.calls item, each up to 16 KiB.
     */
    content?: boolean;
  };
  /**
   * Given to the model with every request of the run (ModelRequest.Instructions: after the model's own system prompt).
   */
  instructions?: string;
  /**
   * The run's sampling parameters, each sent to the model when set, in place of the model's own.
   */
  params?: {
    temperature?: number;
    top_p?: number;
    /**
     * Bounds the answer (max_tokens on the wire).
     */
    max_output_tokens?: number;
  };
  /**
   * Tools the caller runs, not the worker: offered to the model after the worker's. A call the log does not serve is held (an interrupt of hook client_tools) until a resume brings its result (resume-input.json, results). A name a worker tool has fails the run at its start with tulip.BadInput.
   */
  client_tools?: {
    name: string;
    description?: string;
    /**
     * JSON Schema of the arguments object.
     */
    parameters?: {
      [k: string]: unknown;
    };
    /**
     * An identical later call is served from the log (the client's recorded result), with no interrupt.
     */
    idempotent?: boolean;
    [k: string]: unknown;
  }[];
  /**
   * How long the run waits for its client tools' results, in milliseconds: past it the held calls are answered as not performed (trace outcome dropped, never recorded) and the run goes on to its answer. Absent or 0: it waits until answered.
   */
  client_timeout_ms?: number;
  /**
   * On a sub-agent's run (a child workflow a tool started): the calling run's workflow, signalled (tulip.child-interrupt) when this run is interrupted, and this run's agent path.
   */
  parent?: {
    workflow_id: string;
    path: string;
    [k: string]: unknown;
  };
  /**
   * Makes the run a fork of another thread (docs/forks.md): its first run starts from state (the origin's conversation and log before model response at); a call equal to one the origin made from there on is served from the origin's record, once, with no body run (relation "origin"); a call the origin never made is held (interrupt hook "tulip.fork") unless live. The Go client and 'tulip fork' build it.
   */
  fork?: {
    thread: string;
    at: number;
    /**
     * The fork's thread state at its start, in full (checkpoint.json); its first run only.
     */
    state?: {
      [k: string]: unknown;
    };
    /**
     * The origin agent's log: a snapshot of full records.
     */
    origin?: {
      [k: string]: unknown;
    };
    /**
     * The origin records (seq) that served a call already.
     */
    used?: number[];
    live?: boolean;
    [k: string]: unknown;
  };
  /**
   * Set by continue-as-new only (workflow.Carry); clients never set it.
   */
  continued?: {
    [k: string]: unknown;
  };
}

/**
 * The result of tulip.AgentRun, the answer of the tulip.state query, and a failure's details.
 */
export interface RunResult {
  status: 'running' | 'interrupted' | 'completed' | 'failed';
  agent: string;
  thread_id?: string;
  /**
   * The model's final answer.
   */
  answer?: string;
  /**
   * Model responses so far, across continue-as-new.
   */
  turns: number;
  /**
   * The run's trace lines from trace_from on. A run whose trace is large (a long run that continued as new) leaves its lines to the runs that hold them (trace_parts): read them with tulip.page (kind trace).
   */
  trace: TraceLine[];
  interrupt?: Interrupt;
  /**
   * A failed run's message.
   */
  error?: string;
  checkpoint?: Checkpoint;
  /**
   * How often the run continued as new.
   */
  continued_as_new?: number;
  state?: Checkpoint;
  /**
   * The token counts of every model response the run took, summed (resumes and continue-as-new included); absent when the model reported none.
   */
  usage?: {
    prompt_tokens: number;
    completion_tokens: number;
    /**
     * Prompt tokens read from the provider's prompt cache, when it reports them.
     */
    cached_tokens?: number;
    [k: string]: unknown;
  };
  /**
   * The names of the run's client tools (run-input.json, client_tools).
   */
  client_tools?: string[];
  /**
   * The compactions of the model's view of the conversation this workflow run made (docs/context.md): before the model call of turn, the model was sent a summary in place of the conversation's first upto messages.
   */
  compactions?: {
    turn: number;
    /**
     * The summary replaces messages [0, upto) in what the model is sent.
     */
    upto: number;
    /**
     * How many of them this compaction added to the summary.
     */
    replaced: number;
    /**
     * The tokens the call would have sent.
     */
    estimate: number;
    /**
     * The model's context budget.
     */
    budget: number;
    /**
     * The call was refused as too long (then asked again once).
     */
    too_long?: boolean;
    /**
     * The summary's token counts.
     */
    usage?: {
      prompt_tokens?: number;
      completion_tokens?: number;
      cached_tokens?: number;
      [k: string]: unknown;
    };
  }[];
  /**
   * For a run on a thread: the thread's token counts through this run, every run and agent on it (states written before threads counted them count from then on).
   */
  thread_usage?: {
    prompt_tokens: number;
    completion_tokens: number;
    cached_tokens?: number;
    [k: string]: unknown;
  };
  /**
   * The run's save to the worker's thread store failed after its retries: the run completed with its answer, and history alone holds its state (the thread's next run reads it there, and saves). Absent when the save succeeded or the worker has no store.
   */
  store_error?: string;
  /**
   * The run's calls by final outcome.
   */
  summary?: {
    [k: string]: number;
  };
  /**
   * The number of trace's first line (0 when the result holds the whole trace).
   */
  trace_from?: number;
  /**
   * Which runs (same workflow ID; this one included) hold lines [0, trace_from).
   */
  trace_parts?: {
    run: string;
    from: number;
    to: number;
  }[];
}

/**
 * One item of a run's tulip.text stream topic. With stream.text, the model activity publishes each answer in pieces (delta, seq from 0, by attempt); then the workflow publishes one item with done for the turn, naming the attempt whose answer the run took and its number of pieces in seq. Keep that attempt's pieces; drop a failed attempt's. When the answer was not streamed (or not every piece could be sent), the done item holds the whole answer in delta: take it, and ignore that turn's later pieces.
 */
export interface TextItem {
  /**
   * The turn, as on trace lines.
   */
  turn: number;
  /**
   * The model activity's attempt (1 is the first); 0 on a done item whose delta is the whole answer.
   */
  attempt: number;
  /**
   * A piece's number within its attempt; on a done item, how many pieces its attempt had.
   */
  seq: number;
  /**
   * A piece of the answer; on a done item, the whole answer when it was not streamed.
   */
  delta?: string;
  /**
   * The turn's answer is complete.
   */
  done?: boolean;
}

export interface ToolCall {
  id: string;
  name: string;
  /**
   * The argument text exactly as the model emitted it.
   */
  arguments: string;
}

/**
 * One tool call's outcome. A held call has two lines: held when the run stops, then dangling or dropped after the resume; the last line of a call is its final outcome.
 */
export interface TraceLine {
  turn: number;
  call_id: string;
  tool: string;
  /**
   * The arguments compared for dedup (post-hook), as a JSON object; null when rejected, in the held and dropped lines of a call after the first whose text is not a JSON object, and in dropped lines of runs recorded before the workflow version tulip-state-by-ref (their held line has them).
   */
  arguments: {
    [k: string]: unknown;
  } | null;
  /**
   * executed: the body ran; cached: served from the log; cancelled: a hook cancelled it; held: the run was interrupted at or before it; dangling: a held call a resume ran; dropped: a held call a resume did not run; rejected: refused before dedup (docs/protocol.md, Outcomes).
   */
  outcome: 'executed' | 'cached' | 'cancelled' | 'held' | 'dangling' | 'dropped' | 'rejected';
  /**
   * The tool's JSON result, or null (see result_in).
   */
  result: unknown;
  error: string | null;
  /**
   * The log record a cached call was served from.
   */
  served_from?: number;
  relation?: 'earlier_turn' | 'same_response' | 'origin';
  /**
   * The downstream idempotency key.
   */
  key?: string;
  /**
   * With a null result: the result is the content of this message of the thread's conversation (a call served from a record whose result another run holds).
   */
  result_in?: number;
  near_miss?: NearMiss;
  /**
   * On an executed call of a tool whose on_unknown is check or hold: an attempt's outcome was unknown (its worker lost, or an ambiguous error) and how the run resolved it (docs/unknown.md).
   */
  unknown?: {
    /**
     * Why the outcome was unknown, the first time.
     */
    cause: string;
    /**
     * How many times the tool's check asked the service.
     */
    checks: number;
    /**
     * How many times the call ran again, with the same key, after a check found it not applied.
     */
    retries?: number;
    /**
     * applied: a check found the execution applied and its answer is the outcome; retried: the call ran again (after a check or an approval) and the line's outcome is that run's; answered: a person's result (a resume's) is the outcome; not_applied: the check found it not applied and no execution was left (the line's error says so); unresolved: still unknown, the line's error says why (tulip.OutcomeUnknown).
     */
    resolution: 'applied' | 'retried' | 'answered' | 'not_applied' | 'unresolved';
    /**
     * How many times the run was interrupted (hook tulip.unknown) for a person to answer.
     */
    holds?: number;
  };
}
