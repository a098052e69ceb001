/**
 * `ctxdedup/ai-sdk`: a Vercel AI SDK language model middleware that deduplicates the prompt of
 * every `generateText` / `streamText` call, every step of a multi-step tool loop included.
 *
 * ```ts
 * import { wrapLanguageModel } from 'ai';
 * import { dedupeMiddleware } from 'ctxdedup/ai-sdk';
 * const model = wrapLanguageModel({ model: base, middleware: dedupeMiddleware({ onDedupe: (r) => log(r) }) });
 * ```
 *
 * Text parts of user and assistant messages and tool-result outputs (`text`, `error-text`, `json`,
 * `error-json` and the text items of `content` outputs) are deduplicated: the earliest copy stays,
 * later whole copies become reference tags, repeated runs of lines become references (block
 * dedup). System messages, tool-call inputs, files and images, reasoning and provider options
 * pass through untouched, and so do provider-executed tool results (a `tool-result` part inside
 * an assistant message, or one answering a tool call marked `providerExecuted`): they are
 * neither rewritten nor reference targets. The middleware is stateless and deterministic: ids are positional
 * (`m3.1` is part 1 of message 3), so the same conversation prefix always gives the same bytes
 * and the provider's prompt cache keeps hitting. A `json` output that is rewritten is sent as a
 * `text` output holding its JSON text with the references (its other fields, such as
 * `providerOptions`, kept). The text items of `content` outputs take part only for providers
 * that send them as text blocks (Anthropic Messages, OpenAI Responses): others, such as OpenAI Chat
 * Completions, send such an output as one JSON string, where its lines are no lines.
 *
 * Only this subpath loads (types of) the `ai` package, an optional peer dependency.
 * @module
 */
import type { LanguageModelMiddleware } from 'ai';
import { describe, expectOptions, isArraySafe, typeError } from '../validation.js';
import { dedupeUnits, runStage, withEdits, type AdapterDecision, type AdapterOptions, type AdapterReport, type AdapterStats } from './engine.js';
import { deprecatedAlias } from '../deprecated.js';
import { isObject, pathText, type PathStep, type Unit } from './mapping.js';

export type { AdapterOptions, AdapterDecision, AdapterStats, AdapterReport, PathStep };

/** What one model call saved, given to {@link DedupeMiddlewareOptions.onDedupe}. */
export interface DedupeCallReport extends AdapterStats {
  /** `generate` (generateText) or `stream` (streamText). */
  type: 'generate' | 'stream';
  /** One per rewritten text, with its path in the prompt (`[3, 'content', 1, 'text']`). */
  decisions: AdapterDecision[];
}

/** Options of {@link dedupeMiddleware}. */
export interface DedupeMiddlewareOptions extends AdapterOptions {
  /**
   * Called once per model call (each step of a tool loop) with what the call saved. A promise
   * it returns is awaited; if it rejects (or the callback throws), the model call fails.
   */
  onDedupe?: (report: DedupeCallReport) => unknown;
}

/** Known part types that carry no text to deduplicate. */
const OTHER_PARTS: ReadonlySet<string> = new Set([
  'file',
  'reasoning',
  'reasoning-file',
  'custom',
  'tool-call',
  'tool-approval-request',
  'tool-approval-response',
]);

/** Tool-result output types whose value is text, JSON, or content items. */
const TEXT_OUTPUTS: ReadonlySet<string> = new Set(['text', 'error-text']);
const JSON_OUTPUTS: ReadonlySet<string> = new Set(['json', 'error-json']);
const OTHER_OUTPUTS: ReadonlySet<string> = new Set(['execution-denied']);
const OTHER_CONTENT_ITEMS: ReadonlySet<string> = new Set(['media', 'file-data', 'file-url', 'file-id', 'image-data', 'image-url', 'image-file-id', 'custom']);

/** How a unit is written back: a string at its path, or a JSON output replaced by a text output. */
interface Slot {
  path: PathStep[];
  /** Set for `json` / `error-json` outputs: the output object's path and its text type. */
  json?: 'text' | 'error-text';
  /** The JSON output object (its other fields, such as `providerOptions`, are kept). */
  output?: Record<string, unknown>;
}

interface PromptUnits {
  units: Unit[];
  slots: Slot[];
  unknown: number;
}

const ROOT = 'prompt';

function fail(path: readonly PathStep[], problem: string): never {
  return typeError(pathText(ROOT, path), problem);
}

/** `value` if it is a string; else a TypeError naming `path()` (built only then: this runs per part). */
function stringAt(value: unknown, path: () => PathStep[]): string {
  if (typeof value !== 'string') fail(path(), `must be a string, got ${describe(value)}`);
  return value;
}

type Sink = (id: string, role: string, text: string, slot: Slot, blocked: boolean) => void;

/**
 * The AI SDK prompt (LanguageModelV3 / V4 prompt) as units: the one mapping of this format.
 * `contentItems`: whether the text items of `content` tool outputs take part (they reach the
 * model as text blocks); when not, they pass through untouched and are never targets.
 */
function promptUnits(prompt: unknown, contentItems: boolean): PromptUnits {
  if (!isArraySafe(prompt)) fail([], `must be an array, got ${describe(prompt)}`);
  const out: PromptUnits = { units: [], slots: [], unknown: 0 };
  /** Ids of the tool calls marked `providerExecuted` seen so far. */
  const providerExecuted = new Set<unknown>();
  // Positional ids are unique by construction.
  const add: Sink = (id, role, text, slot, blocked) => {
    const message: Unit['message'] = { id, role, content: text };
    if (blocked) message.tool_calls = [true];
    out.units.push({ message, path: slot.path });
    out.slots.push(slot);
  };
  for (let i = 0; i < prompt.length; i++) {
    const m: unknown = prompt[i];
    if (!isObject(m)) fail([i], `must be an object, got ${describe(m)}`);
    const role = stringAt(m['role'], () => [i, 'role']);
    const content = m['content'];
    if (role === 'system') {
      add(
        `m${i}`,
        role,
        stringAt(content, () => [i, 'content']),
        { path: [i, 'content'] },
        false,
      );
      continue;
    }
    if (!isArraySafe(content)) fail([i, 'content'], `must be an array, got ${describe(content)}`);
    let blocked = false;
    for (let j = 0; j < content.length; j++) {
      const part: unknown = content[j];
      if (isObject(part) && part['type'] === 'tool-call') {
        blocked = true;
        if (part['providerExecuted'] === true) providerExecuted.add(part['toolCallId']);
      }
    }
    for (let j = 0; j < content.length; j++) {
      const part: unknown = content[j];
      if (!isObject(part)) fail([i, 'content', j], `must be an object, got ${describe(part)}`);
      const type = stringAt(part['type'], () => [i, 'content', j, 'type']);
      if (type === 'text') {
        add(
          `m${i}.${j}`,
          role,
          stringAt(part['text'], () => [i, 'content', j, 'text']),
          { path: [i, 'content', j, 'text'] },
          blocked,
        );
      } else if (type === 'tool-result') {
        // A provider-executed result (inside the assistant message, or answering a call marked
        // `providerExecuted`) goes back to the provider that produced it, which reads its own
        // shape (e.g. Anthropic web_search JSON): byte-identical, out of dedup entirely.
        if (role !== 'assistant' && !providerExecuted.has(part['toolCallId'])) toolResult(part, i, j, add, out, contentItems);
      } else if (!OTHER_PARTS.has(type)) {
        out.unknown++;
      }
    }
  }
  return out;
}

function toolResult(part: Record<string, unknown>, i: number, j: number, add: Sink, out: PromptUnits, contentItems: boolean): void {
  const id = `m${i}.${j}`;
  const output = part['output'];
  if (!isObject(output)) fail([i, 'content', j, 'output'], `must be an object, got ${describe(output)}`);
  const type = stringAt(output['type'], () => [i, 'content', j, 'output', 'type']);
  if (TEXT_OUTPUTS.has(type)) {
    const text = stringAt(output['value'], () => [i, 'content', j, 'output', 'value']);
    add(id, 'tool', text, { path: [i, 'content', j, 'output', 'value'] }, false);
  } else if (JSON_OUTPUTS.has(type)) {
    // What providers send for a JSON output: its JSON text. A value `JSON.stringify` cannot
    // serialize (a BigInt, a cycle, a throwing `toJSON`) is left to the provider, which may
    // serialize it its own way: it passes through untouched and is no target.
    let text: string | undefined;
    try {
      text = JSON.stringify(output['value']) as string | undefined;
    } catch {
      return;
    }
    if (text !== undefined) add(id, 'tool', text, { path: [i, 'content', j, 'output'], json: type === 'json' ? 'text' : 'error-text', output }, false);
  } else if (type === 'content') {
    if (!contentItems) return;
    const items = output['value'];
    if (!isArraySafe(items)) fail([i, 'content', j, 'output', 'value'], `must be an array, got ${describe(items)}`);
    for (let k = 0; k < items.length; k++) {
      const item: unknown = items[k];
      if (!isObject(item)) fail([i, 'content', j, 'output', 'value', k], `must be an object, got ${describe(item)}`);
      const itemType = stringAt(item['type'], () => [i, 'content', j, 'output', 'value', k, 'type']);
      if (itemType === 'text') {
        const text = stringAt(item['text'], () => [i, 'content', j, 'output', 'value', k, 'text']);
        add(`${id}.${k}`, 'tool', text, { path: [i, 'content', j, 'output', 'value', k, 'text'] }, false);
      } else if (!OTHER_CONTENT_ITEMS.has(itemType)) {
        out.unknown++;
      }
    }
  } else if (!OTHER_OUTPUTS.has(type)) {
    out.unknown++;
  }
}

/** The result of {@link dedupePrompt}. */
export interface DedupePromptResult<P> {
  /** The prompt with deduplicated texts; everything else is the input's, untouched. */
  prompt: P;
  decisions: AdapterDecision[];
  stats: AdapterStats;
  /** @deprecated Use `stats` (the same object). Not enumerable: absent from JSON. */
  readonly report: AdapterStats;
}

/**
 * Deduplicates an AI SDK language model prompt (what the middleware does on each call).
 *
 * The text items of `content` tool outputs take part as text blocks (as Anthropic Messages and
 * OpenAI Responses send them); the middleware leaves them alone for providers that send such an
 * output as one JSON string. A `json` output `JSON.stringify` cannot serialize passes through.
 *
 * @throws TypeError naming the path (`prompt[3].content[1].type must be a string`) for a malformed
 *   prompt; TypeError / RangeError for a bad option.
 */
export function dedupePrompt<P>(prompt: P, options?: AdapterOptions): DedupePromptResult<P> {
  return dedupePromptFor(prompt, options, true);
}

function dedupePromptFor<P>(prompt: P, options: AdapterOptions | undefined, contentItems: boolean): DedupePromptResult<P> {
  const { units, slots, unknown } = promptUnits(prompt, contentItems);
  const { edits, decisions, stats } = dedupeUnits(units, unknown, options);
  const changes: [PathStep[], unknown][] = [];
  for (const [i, text] of edits) {
    const slot = slots[i] as Slot;
    changes.push([slot.path, slot.json === undefined ? text : { ...slot.output, type: slot.json, value: text }]);
  }
  return deprecatedAlias({ prompt: withEdits(prompt, changes), decisions, stats }, 'report', stats) as DedupePromptResult<P>;
}

/**
 * Whether `provider` (a model's `provider` id) sends the text items of a `content` tool output to
 * the model as text blocks, where their lines are lines: Anthropic Messages (direct, or through
 * Bedrock or Vertex) and OpenAI Responses do. Others, OpenAI Chat Completions among them, send the
 * output as one JSON string, where a reference to "lines 12–40" of an item would point at nothing
 * the model sees as lines: there the items are left alone.
 */
function sendsContentItemsAsText(provider: string): boolean {
  return /(^|\.)anthropic(\.|$)/.test(provider) || provider === 'openai.responses';
}

/**
 * The middleware: `wrapLanguageModel({ model, middleware: dedupeMiddleware(options) })`.
 * Options are validated here, once; `onDedupe` receives each call's report.
 *
 * @throws TypeError / RangeError for a bad option (`options.minChars must be ...`).
 */
export function dedupeMiddleware(options?: DedupeMiddlewareOptions): LanguageModelMiddleware {
  // A snapshot, validated now rather than at the first model call: every call uses the same options.
  expectOptions(options);
  // `onDedupe` is the middleware's own; the rest goes to the stage (which refuses unknown names).
  const { onDedupe, ...rest } = options ?? {};
  const stageOptions: AdapterOptions | undefined = options === undefined ? undefined : rest;
  runStage([], stageOptions);
  if (onDedupe !== undefined && typeof onDedupe !== 'function') typeError('options.onDedupe', `must be a function, got ${describe(onDedupe)}`);
  const middleware = {
    // The AI SDK does not check this field at run time; the prompt shape is the same in v3 and v4.
    specificationVersion: 'v3',
    transformParams: async ({ params, type, model }: { params: { prompt: unknown }; type: 'generate' | 'stream'; model?: { provider?: unknown } }) => {
      const provider = typeof model?.provider === 'string' ? model.provider : '';
      const { prompt, decisions, stats } = dedupePromptFor(params.prompt, stageOptions, sendsContentItemsAsText(provider));
      // Awaited: an async callback that fails fails the call, as a throwing one does.
      await onDedupe?.({ ...stats, type, decisions });
      return { ...params, prompt };
    },
  };
  return middleware as unknown as LanguageModelMiddleware;
}
