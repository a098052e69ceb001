/**
 * Transcript formats: detection, and the lossless mapping between a parsed document and the flat
 * message list the message stage deduplicates.
 *
 * Every text a format carries (a string `content`, a `text` block, a `tool_result` whose content
 * is a string or text blocks) becomes one internal message whose `path` says where the text sits
 * in the parsed document. Deduplication only ever replaces the string at such a path, so writing
 * the document back changes nothing else, and the verbatim file (path + original string) undoes it.
 * The per-message mapping is src/adapters/mapping.ts, shared with `dedupeOpenAIChat` and
 * `dedupeAnthropicMessages` (the CLI applies both dialects' rules, since a file's is only guessed).
 * @module
 */
import { collectMessage, Ids, isObject, type PathStep, type Unit } from '../adapters/mapping.js';

export type { PathStep, Unit };

/** Formats the CLI reads and writes. */
export const FORMATS = ['openai', 'anthropic', 'ctxdedup', 'agent-jsonl', 'sessions-jsonl'] as const;

/** A transcript format name. */
export type FormatName = (typeof FORMATS)[number];

/** How a file is laid out: one JSON document, or one JSON value per line. */
export type Container = 'json' | 'jsonl';

/** The internal message list of one session. */
export interface Extracted {
  units: Unit[];
  /** Conversation messages seen (a message with three text blocks counts once). */
  messages: number;
}

/** Which container a format uses. */
export function containerOf(format: FormatName): Container {
  return format === 'agent-jsonl' || format === 'sessions-jsonl' ? 'jsonl' : 'json';
}

/** The message dialect of a messages array: ids + indexes, Anthropic content blocks, or OpenAI. */
export function dialectOf(messages: readonly unknown[]): 'openai' | 'anthropic' | 'ctxdedup' {
  let allIds = messages.length > 0;
  for (const m of messages) {
    if (!isObject(m)) {
      allIds = false;
      continue;
    }
    if (typeof m['id'] !== 'string' || typeof m['index'] !== 'number') allIds = false;
    const content = m['content'];
    if (Array.isArray(content)) {
      for (const block of content) {
        if (isObject(block) && (block['type'] === 'tool_use' || block['type'] === 'tool_result')) return 'anthropic';
      }
    }
  }
  return allIds ? 'ctxdedup' : 'openai';
}

/** The messages array of a JSON transcript document and its path, or `undefined` if it has none. */
export function messagesOf(doc: unknown): { messages: unknown[]; base: PathStep[] } | undefined {
  if (Array.isArray(doc)) return { messages: doc, base: [] };
  if (isObject(doc) && Array.isArray(doc['messages'])) return { messages: doc['messages'], base: ['messages'] };
  return undefined;
}

/** Collects the units of one message object found at `at`: the shared mapping, both dialects' rules. */
function collect(m: Record<string, unknown>, at: PathStep[], baseId: string, ids: Ids, out: Unit[]): void {
  collectMessage(m, at, baseId, ids, out, { dialect: 'any', unknown: 0 });
}

/**
 * Names for the items of one document: an item's own id, or its positional name (`m3`, `l12`)
 * when it has none or when an earlier item already has the same id (a reference must name one
 * item, and one a reader can find: a suffixed variant such as `a~2` exists nowhere in the file).
 */
class Names {
  private readonly bases = new Set<string>();
  readonly ids: Ids;
  constructor(own: readonly (string | undefined)[]) {
    this.ids = new Ids(new Set(own.filter((id): id is string => id !== undefined)));
  }
  /** The base name of an item whose own id is `own` and whose positional name is `position`. */
  base(own: string | undefined, position: string): string {
    const name = own === undefined || (this.bases.has(own) && this.ids.free(position)) ? position : own;
    this.bases.add(name);
    return name;
  }
}

/** `value` if it is a non-empty string. */
function ownId(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * The units of a messages array (OpenAI, Anthropic or ctxdedup dialect). Ids are the messages'
 * own string `id`s when present (and not already used by an earlier message), otherwise
 * `m<index>`; content blocks add `.<block>`.
 */
export function extractMessages(messages: readonly unknown[], base: PathStep[]): Extracted {
  const names = new Names(messages.map((m) => (isObject(m) ? ownId(m['id']) : undefined)));
  const units: Unit[] = [];
  let count = 0;
  messages.forEach((m, i) => {
    if (!isObject(m)) return;
    count++;
    collect(m, [...base, i], names.base(ownId(m['id']), `m${i}`), names.ids, units);
  });
  return { units, messages: count };
}

/**
 * The units of agent session events (one parsed JSONL line each; `undefined` for blank or
 * skipped lines). An event carries its message as `message: { role, content }` and is named by
 * its `uuid`; a line that is itself a message (`role` + `content`) is accepted too.
 */
export function extractEvents(events: readonly unknown[]): Extracted {
  const own = events.map((event) => {
    if (!isObject(event)) return undefined;
    return isObject(event['message']) ? ownId(event['uuid']) : (ownId(event['id']) ?? ownId(event['uuid']));
  });
  const names = new Names(own);
  const units: Unit[] = [];
  let count = 0;
  events.forEach((event, line) => {
    if (!isObject(event)) return;
    if (isObject(event['message'])) {
      count++;
      collect(event['message'], [line, 'message'], names.base(own[line], `l${line + 1}`), names.ids, units);
    } else if ('role' in event && 'content' in event) {
      count++;
      collect(event, [line], names.base(own[line], `l${line + 1}`), names.ids, units);
    }
  });
  return { units, messages: count };
}

/** Reads the value at `path` inside `root`. */
export function getAt(root: unknown, path: readonly PathStep[]): unknown {
  let node: unknown = root;
  for (const step of path) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<PathStep, unknown>)[step];
  }
  return node;
}
