/**
 * The one mapping between provider message shapes (OpenAI Chat Completions, Anthropic Messages)
 * and the flat `{ id, role, content }` list the message stage deduplicates. The CLI's transcript
 * readers (src/cli/formats.ts) and the request adapters (src/adapters/requests.ts) both use it.
 *
 * Every text a message carries (a string `content`, a `text` part or block, a `tool_result` whose
 * content is a string or text blocks) becomes one unit: an internal message plus the path of its
 * string in the document. Deduplication only ever replaces the string at such a path.
 * @internal
 * @module
 */
import { describe, isArrayOrRevoked, isArraySafe, typeError } from '../validation.js';
import type { Message } from '../stages/messages.js';

/** A step into a parsed JSON value. */
export type PathStep = string | number;

/** One deduplicable text: an internal message plus where its text sits in the document. */
export interface Unit {
  message: Message;
  path: PathStep[];
}

/**
 * Which rules apply: a provider's own, or (`'any'`, the CLI's transcript readers) the union of
 * both, for files whose dialect is only guessed.
 */
export type Dialect = 'openai' | 'anthropic' | 'any';

type Json = Record<string, unknown>;

/** Whether `value` is a plain object (not null, not an array). */
export function isObject(value: unknown): value is Json {
  // A revoked proxy is no object to read (every read throws): callers report it by `describe`.
  return typeof value === 'object' && value !== null && !isArrayOrRevoked(value);
}

/** Content part types of OpenAI Chat Completions messages that carry no text to deduplicate. */
const OPENAI_OTHER_PARTS: ReadonlySet<string> = new Set(['image_url', 'input_audio', 'file', 'refusal']);

/** Anthropic Messages content block types that pass through untouched (known, not text). */
const ANTHROPIC_OTHER_BLOCKS: ReadonlySet<string> = new Set([
  'image',
  'document',
  'tool_use',
  'thinking',
  'redacted_thinking',
  'server_tool_use',
  'web_search_tool_result',
  'web_fetch_tool_result',
  'code_execution_tool_result',
  'bash_code_execution_tool_result',
  'text_editor_code_execution_tool_result',
  'mcp_tool_use',
  'mcp_tool_result',
  'search_result',
  'container_upload',
]);

/** Block types a `tool_result`'s content may hold besides `text`. */
const ANTHROPIC_TOOL_RESULT_OTHER: ReadonlySet<string> = new Set(['image', 'document', 'search_result']);

/**
 * Chooses unique ids: the preferred one, or a suffixed variant when it is taken. A suffixed
 * variant is never one of `reserved` (ids the document itself uses, which a reader would take
 * for that other item).
 */
export class Ids {
  private readonly seen = new Set<string>();
  constructor(private readonly reserved: ReadonlySet<string> = new Set()) {}
  /** Whether `id` is free: neither taken nor reserved. */
  free(id: string): boolean {
    return !this.seen.has(id) && !this.reserved.has(id);
  }
  take(preferred: string): string {
    let id = preferred;
    for (let n = 2; this.seen.has(id) || (id !== preferred && this.reserved.has(id)); n++) id = `${preferred}~${n}`;
    this.seen.add(id);
    return id;
  }
}

/** `request.messages[3].content[1].type` from a root name and path steps. */
export function pathText(root: string, path: readonly PathStep[]): string {
  let text = root;
  for (const step of path) text += typeof step === 'number' ? `[${step}]` : `.${step}`;
  return text;
}

/** How one message is read: the dialect, strictness and the counters a report shows. */
export interface Reading {
  dialect: Dialect;
  /**
   * Root name for error paths. When set, malformed input throws a TypeError naming the path;
   * when absent (the CLI), malformed parts are skipped and left as they are.
   */
  strict?: string;
  /** Parts or blocks of an unknown type (passed through untouched). */
  unknown: number;
}

function malformed(reading: Reading, path: readonly PathStep[], problem: string): void {
  if (reading.strict !== undefined) typeError(pathText(reading.strict, path), problem);
}

function typeOf(block: Json, reading: Reading, path: PathStep[]): string | undefined {
  const type = block['type'];
  if (typeof type === 'string') return type;
  malformed(reading, [...path, 'type'], `must be a string, got ${describe(type)}`);
  return undefined;
}

/**
 * Collects the units of one message object found at `at` (`baseId` names it; content parts add
 * `.<part>` and `tool_result` blocks `.<block>.<inner>`).
 */
export function collectMessage(m: Json, at: PathStep[], baseId: string, ids: Ids, out: Unit[], reading: Reading): void {
  const { dialect } = reading;
  const anthropic = dialect !== 'openai';
  const openai = dialect !== 'anthropic';
  const rawRole = m['role'];
  if (rawRole !== undefined && typeof rawRole !== 'string') malformed(reading, [...at, 'role'], `must be a string, got ${describe(rawRole)}`);
  const role = typeof rawRole === 'string' ? rawRole : undefined;
  const content = m['content'];
  // A message that calls tools is never rewritten (the stage's rule): OpenAI `tool_calls`, or an
  // Anthropic `tool_use` block.
  let hasToolUse = openai && isArraySafe(m['tool_calls']) && m['tool_calls'].length > 0;
  if (anthropic && isArraySafe(content)) {
    for (const block of content) if (isObject(block) && block['type'] === 'tool_use') hasToolUse = true;
  }
  collectContent(content, [...at, 'content'], baseId, role, hasToolUse, ids, out, reading);
}

type UnitSink = (id: string, role: string | undefined, text: string, path: PathStep[], blocked: boolean) => void;

/** Collects the texts of a `content` value (a string or parts) found at `at`. */
function collectContent(
  content: unknown,
  at: PathStep[],
  baseId: string,
  role: string | undefined,
  blocked: boolean,
  ids: Ids,
  out: Unit[],
  reading: Reading,
): void {
  const { dialect } = reading;
  const anthropic = dialect !== 'openai';
  const openai = dialect !== 'anthropic';
  const unit: UnitSink = (id, unitRole, text, path, isBlocked) => {
    const message: Message = { id: ids.take(id), content: text };
    if (unitRole !== undefined) message.role = unitRole;
    if (isBlocked) message.tool_calls = [true];
    out.push({ message, path });
  };
  if (typeof content === 'string') {
    unit(baseId, role, content, at, blocked);
    return;
  }
  if (!isArraySafe(content)) {
    if (content !== undefined && content !== null) malformed(reading, at, `must be a string, an array or null, got ${describe(content)}`);
    return;
  }
  for (let j = 0; j < content.length; j++) {
    const block: unknown = content[j];
    const path = [...at, j];
    if (!isObject(block)) {
      malformed(reading, path, `must be an object, got ${describe(block)}`);
      continue;
    }
    const type = typeOf(block, reading, path);
    if (type === undefined) continue;
    if (type === 'text') {
      const text = block['text'];
      if (typeof text === 'string') unit(`${baseId}.${j}`, role, text, [...path, 'text'], blocked);
      else malformed(reading, [...path, 'text'], `must be a string, got ${describe(text)}`);
    } else if (anthropic && type === 'tool_result') {
      collectToolResult(block, path, `${baseId}.${j}`, unit, reading);
    } else if (!(openai && OPENAI_OTHER_PARTS.has(type)) && !(anthropic && ANTHROPIC_OTHER_BLOCKS.has(type))) {
      reading.unknown++;
    }
  }
}

function collectToolResult(block: Json, path: PathStep[], id: string, unit: UnitSink, reading: Reading): void {
  const inner = block['content'];
  if (typeof inner === 'string') {
    unit(id, 'tool', inner, [...path, 'content'], false);
    return;
  }
  if (!isArraySafe(inner)) {
    if (inner !== undefined) malformed(reading, [...path, 'content'], `must be a string or an array, got ${describe(inner)}`);
    return;
  }
  for (let k = 0; k < inner.length; k++) {
    const b: unknown = inner[k];
    const at = [...path, 'content', k];
    if (!isObject(b)) {
      malformed(reading, at, `must be an object, got ${describe(b)}`);
      continue;
    }
    const type = typeOf(b, reading, at);
    if (type === undefined) continue;
    if (type === 'text') {
      const text = b['text'];
      if (typeof text === 'string') unit(`${id}.${k}`, 'tool', text, [...at, 'text'], false);
      else malformed(reading, [...at, 'text'], `must be a string, got ${describe(text)}`);
    } else if (!ANTHROPIC_TOOL_RESULT_OTHER.has(type)) {
      reading.unknown++;
    }
  }
}

/** The units of an Anthropic `system` field (a string or text blocks) at `at`, with role `system`. */
export function collectSystem(system: unknown, at: PathStep[], ids: Ids, out: Unit[], reading: Reading): void {
  collectContent(system, at, 'system', 'system', false, ids, out, reading);
}
