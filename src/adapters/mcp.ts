/**
 * `ctxdedup/mcp`: a wrapper around the official `@modelcontextprotocol/sdk` `Client` whose
 * `callTool` passes every result through a {@link ResourceLedger}
 * ({@link ResourceLedger.processToolResult}), so a file the model already has comes back as a
 * short reference. Only this subpath refers to the MCP SDK (an optional peer dependency), and
 * only for types: the client is the caller's.
 * @module
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { describe, expectKnownKeys, typeError } from '../validation.js';
import {
  processToolResultUndoable,
  ResourceLedger,
  restoreToolResult,
  type McpContentBlock,
  type McpToolResult,
  type ToolCallInfo,
  type ToolResultDecision,
  type ToolResultProcessed,
} from '../stages/resources.js';

export { ResourceLedger, restoreToolResult };
export type { McpContentBlock, McpToolResult, ToolCallInfo, ToolResultDecision, ToolResultProcessed };

/** Options of {@link dedupeMcpClient}. */
export interface DedupeMcpClientOptions {
  /** The conversation's ledger. Default: a new `ResourceLedger()`. */
  ledger?: ResourceLedger;
  /**
   * The conversation turn of a call (the turn `forgetTurns` / `compactBefore` speak of).
   * Default: the ledger's latest turn, or 0 before any.
   */
  turn?: () => number;
  /** The call id a reference names (`tool call \`c7\` in turn 3`). Default: `<tool>#<n>`, n counting calls from 1. */
  callId?: (params: { name: string; arguments?: Record<string, unknown> }) => string;
  /**
   * Called with every processed result (its decisions and report) before `callTool` returns it;
   * a promise it returns is awaited, and results wait their turn meanwhile. If it throws or
   * rejects, `callTool` rejects with that error and the ledger is rolled back: the result never
   * reached the caller, so nothing it delivered is recorded (no later reference points to it).
   */
  onResult?: (processed: ToolResultProcessed, call: ToolCallInfo) => unknown;
}

/** A client whose `callTool` deduplicates through {@link DedupedMcpClient.ledger}. */
export type DedupedMcpClient<C extends Client = Client> = C & {
  /** The ledger the results go through. */
  readonly ledger: ResourceLedger;
};

/**
 * Wraps an MCP `Client`: every other method and property is the client's own; `callTool` returns
 * the result with embedded resources the conversation already has replaced by references.
 * Results without a `content` array (the legacy `toolResult` form) pass through untouched, and
 * so do embedded resources the SDK accepts but whose content cannot be checksummed faithfully
 * (a `text` with a lone surrogate, a line-wrapped base64 `blob`): delivered in full, reported with
 * reason `unsupported`. `restoreToolResult(result, processed.decisions)` gives back the server's
 * result exactly.
 *
 * @throws TypeError if `client` has no `callTool` method or an option has the wrong type.
 * @example
 * const client = dedupeMcpClient(new Client({ name: 'agent', version: '1.0.0' }));
 * await client.connect(transport);
 * const result = await client.callTool({ name: 'read_file', arguments: { path: 'a.ts' } });
 * client.ledger.forgetTurns([1, 2]); // after compacting those turns away
 */
export function dedupeMcpClient<C extends Client>(client: C, options?: DedupeMcpClientOptions): DedupedMcpClient<C> {
  const target: unknown = client;
  if (typeof target !== 'object' || target === null || typeof (target as Record<string, unknown>)['callTool'] !== 'function') {
    typeError('client', `must be an MCP Client (with a callTool method), got ${describe(target)}`);
  }
  const o: Record<string, unknown> = options === undefined ? {} : (options as unknown as Record<string, unknown>);
  if (options !== undefined && (typeof options !== 'object' || options === null)) typeError('options', `must be an object, got ${describe(options)}`);
  expectKnownKeys(o, 'options', ['ledger', 'turn', 'callId', 'onResult']);
  for (const name of ['turn', 'callId', 'onResult'] as const) {
    if (o[name] !== undefined && typeof o[name] !== 'function') typeError(`options.${name}`, `must be a function, got ${describe(o[name])}`);
  }
  if (o['ledger'] !== undefined && !(o['ledger'] instanceof ResourceLedger)) {
    typeError('options.ledger', `must be a ResourceLedger, got ${describe(o['ledger'])}`);
  }
  const ledger = options?.ledger ?? new ResourceLedger();
  const turnOf = options?.turn ?? (() => ledger.turn ?? 0);
  let calls = 0;
  const callIdOf = options?.callId ?? ((params: { name: string }) => `${params.name}#${++calls}`);
  // Results are processed one at a time, in the order they arrive: while an async `onResult`
  // is pending, no other result may record deliveries (or refer to this one's), since a
  // rejection takes this one's back.
  let processing: Promise<unknown> = Promise.resolve();
  const callTool: Client['callTool'] = async (params, resultSchema, requestOptions) => {
    const result = await client.callTool(params, resultSchema, requestOptions);
    if (!Array.isArray((result as { content?: unknown }).content)) return result;
    const process = async (): Promise<Awaited<ReturnType<Client['callTool']>>> => {
      const call: ToolCallInfo = { turn: turnOf(), tool: params.name, callId: callIdOf(params) };
      const { processed, undo } = processToolResultUndoable(ledger, result as unknown as McpToolResult, call);
      const onResult = options?.onResult;
      if (onResult !== undefined) {
        try {
          await onResult(processed, call);
        } catch (error) {
          // The caller never gets this result: take back the deliveries it would have recorded.
          undo();
          throw error;
        }
      }
      return processed.result as unknown as Awaited<ReturnType<Client['callTool']>>;
    };
    const done = processing.then(process);
    processing = done.catch(() => undefined);
    return done;
  };
  return new Proxy(client, {
    get(t, property) {
      if (property === 'callTool') return callTool;
      if (property === 'ledger') return ledger;
      const value: unknown = Reflect.get(t, property, t);
      // Methods run on the client itself (its private fields are not on the proxy).
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(t) : value;
    },
  }) as DedupedMcpClient<C>;
}
