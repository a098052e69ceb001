/**
 * Provider request shapes as library functions: an OpenAI Chat Completions request or an
 * Anthropic Messages request in, a request of the same shape out, with only deduplicated texts
 * changed. The mapping from request to texts is the one the CLI's transcript readers use
 * (src/adapters/mapping.ts).
 *
 * Ids are positional (`m3`, `m3.1` for part 1 of message 3, `m3.1.0` for text 0 of a
 * `tool_result` block, `system` / `system.0` for Anthropic's `system`), so the same prefix of a
 * conversation always gives the same bytes, and provider prompt caches keep hitting.
 * @module
 */
import { describe, expectArray, expectObject, show, typeError } from '../validation.js';
import { dedupeUnits, withEdits, type AdapterDecision, type AdapterOptions, type AdapterReport, type AdapterStats } from './engine.js';
import { deprecatedAlias } from '../deprecated.js';
import { collectMessage, collectSystem, Ids, isObject, type PathStep, type Reading, type Unit } from './mapping.js';

export type { AdapterOptions, AdapterDecision, AdapterStats, AdapterReport, PathStep };

/** Result of {@link dedupeOpenAIChat} and {@link dedupeAnthropicMessages}. */
export interface RequestDedupeResult<R> {
  /** The request with deduplicated texts; every other value is the input's, untouched. */
  request: R;
  /** Original texts of the rewritten ones, by unit id (what `restore…` puts back). */
  verbatim: Record<string, string>;
  /** One per rewritten text, with the text's path in the request. */
  decisions: AdapterDecision[];
  stats: AdapterStats;
  /** @deprecated Use `stats` (the same object). Not enumerable: absent from JSON. */
  readonly report: AdapterStats;
}

type Format = 'openai' | 'anthropic';

function unitsOf(request: unknown, format: Format, path: string): { units: Unit[]; unknown: number } {
  expectObject(request, path);
  const messages = request['messages'];
  expectArray(messages, `${path}.messages`);
  const reading: Reading = { dialect: format, strict: path, unknown: 0 };
  const ids = new Ids();
  const units: Unit[] = [];
  if (format === 'anthropic') collectSystem(request['system'], ['system'], ids, units, reading);
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    if (!isObject(m)) typeError(`${path}.messages[${i}]`, `must be an object, got ${describe(m)}`);
    collectMessage(m, ['messages', i], `m${i}`, ids, units, reading);
  }
  return { units, unknown: reading.unknown };
}

function dedupeRequest<R>(request: R, format: Format, options: AdapterOptions | undefined): RequestDedupeResult<R> {
  const { units, unknown } = unitsOf(request, format, 'request');
  const { edits, verbatim, decisions, stats } = dedupeUnits(units, unknown, options);
  const out = withEdits(
    request,
    [...edits].map(([i, text]) => [(units[i] as Unit).path, text] as [PathStep[], string]),
  );
  return deprecatedAlias({ request: out, verbatim, decisions, stats }, 'report', stats) as RequestDedupeResult<R>;
}

function restoreRequest<R>(request: R, verbatim: Record<string, string>, format: Format): R {
  const { units } = unitsOf(request, format, 'request');
  expectObject(verbatim, 'verbatim');
  const edits: [PathStep[], string][] = [];
  const found = new Set<string>();
  for (const u of units) {
    if (!Object.hasOwn(verbatim, u.message.id)) continue;
    const text: unknown = verbatim[u.message.id];
    if (typeof text !== 'string') typeError(`verbatim[${show(u.message.id)}]`, `must be a string, got ${describe(text)}`);
    edits.push([u.path, text]);
    found.add(u.message.id);
  }
  for (const id of Object.keys(verbatim)) {
    if (!found.has(id)) typeError(`verbatim[${show(id)}]`, 'names no text of the request (was the request restructured?)');
  }
  return withEdits(request, edits);
}

/**
 * What {@link dedupeOpenAIChat} requires of a request type: any object type with these fields
 * fits, the `openai` package's `ChatCompletionCreateParams` and your own interfaces included.
 * The result has the request's own type.
 */
export interface OpenAIChatRequestFields {
  messages: readonly {
    role: string;
    content?: string | readonly { type: string; text?: string }[] | null;
    tool_calls?: readonly unknown[];
  }[];
}

/**
 * What {@link dedupeAnthropicMessages} requires of a request type: any object type with these
 * fields fits, the `@anthropic-ai/sdk` package's `MessageCreateParams` and your own interfaces
 * included. The result has the request's own type.
 */
export interface AnthropicMessagesRequestFields {
  system?: string | readonly { type: string; text?: string }[];
  messages: readonly {
    role: string;
    /** Blocks' `content` (`tool_result`) is checked at run time. */
    content: string | readonly { type: string; text?: string; content?: unknown }[];
  }[];
}

/** An OpenAI Chat Completions request (only `messages` is read; every other field is kept). */
export interface OpenAIChatRequest {
  messages: OpenAIChatMessage[];
  [field: string]: unknown;
}

/** A Chat Completions message: `content` is a string, content parts or null. */
export interface OpenAIChatMessage {
  role: string;
  content?: string | OpenAIContentPart[] | null;
  tool_calls?: unknown[];
  [field: string]: unknown;
}

/** A Chat Completions content part (`text`, `image_url`, `input_audio`, `file`, `refusal`, ...). */
export interface OpenAIContentPart {
  type: string;
  text?: string;
  [field: string]: unknown;
}

/** An Anthropic Messages request (`system` and `messages` are read; every other field is kept). */
export interface AnthropicMessagesRequest {
  system?: string | AnthropicBlock[];
  messages: AnthropicMessage[];
  [field: string]: unknown;
}

/** An Anthropic message: `content` is a string or content blocks. */
export interface AnthropicMessage {
  role: string;
  content: string | AnthropicBlock[];
  [field: string]: unknown;
}

/** An Anthropic content block (`text`, `tool_use`, `tool_result`, `image`, `document`, ...). */
export interface AnthropicBlock {
  type: string;
  text?: string;
  /** `tool_result` content: a string or blocks. */
  content?: string | AnthropicBlock[];
  [field: string]: unknown;
}

/**
 * Deduplicates the texts of a Chat Completions request: string contents and `text` parts of
 * user, assistant and `tool` messages (system and developer messages are kept, and so are the
 * texts of a message that has `tool_calls`). The earliest copy stays; later whole copies become
 * reference tags, repeated runs of lines become references (block dedup).
 *
 * @returns the request of the same shape, the verbatim map, decisions and totals.
 * @throws TypeError naming the path (`request.messages[3].content[1].type must be a string`)
 *   for a malformed request; TypeError / RangeError for a bad option.
 * @example
 * const { request: smaller, verbatim } = dedupeOpenAIChat(request);
 * restoreOpenAIChat(smaller, verbatim); // deep-equals request
 */
export function dedupeOpenAIChat<R extends OpenAIChatRequestFields>(request: R, options?: AdapterOptions): RequestDedupeResult<R> {
  return dedupeRequest(request, 'openai', options);
}

/**
 * Deduplicates the texts of an Anthropic Messages request: `text` blocks, string contents and
 * the texts of `tool_result` blocks (`system` is read as a source and never rewritten; texts of
 * a message with a `tool_use` block are kept). `cache_control` and every other field are kept.
 *
 * @returns the request of the same shape, the verbatim map, decisions and totals.
 * @throws TypeError naming the path for a malformed request; TypeError / RangeError for a bad option.
 */
export function dedupeAnthropicMessages<R extends AnthropicMessagesRequestFields>(request: R, options?: AdapterOptions): RequestDedupeResult<R> {
  return dedupeRequest(request, 'anthropic', options);
}

/**
 * Puts the original texts back into a request returned by {@link dedupeOpenAIChat}.
 * @throws TypeError if the request is malformed or `verbatim` names a text the request lacks.
 */
export function restoreOpenAIChat<R extends OpenAIChatRequestFields>(request: R, verbatim: Record<string, string>): R {
  return restoreRequest(request, verbatim, 'openai');
}

/**
 * Puts the original texts back into a request returned by {@link dedupeAnthropicMessages}.
 * @throws TypeError if the request is malformed or `verbatim` names a text the request lacks.
 */
export function restoreAnthropicMessages<R extends AnthropicMessagesRequestFields>(request: R, verbatim: Record<string, string>): R {
  return restoreRequest(request, verbatim, 'anthropic');
}
