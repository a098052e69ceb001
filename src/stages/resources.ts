/**
 * Stage `resources`: stop re-delivering resource content the model already has.
 *
 * A {@link ResourceLedger} is scoped to one conversation. It records every delivery of resource
 * content (user attachments and tool responses) by URI and SHA-256 checksum, and rewrites each
 * new tool response block by block: a resource block whose URI (an opaque string, compared
 * exactly, never canonicalized) and checksum both equal an earlier delivery that the model can
 * still see is replaced by a short reference message. Everything else passes through. The tool
 * itself always runs; only its output is rewritten.
 *
 * Rules, in the order they are applied to a resource block of a tool response:
 * 1. `enabled: false` (conversation level): delivered, nothing recorded.
 * 2. Content of at most `minBytes` bytes (UTF-8 bytes of a string, or the bytes given): delivered,
 *    not recorded (an identical later block is just as small, so it is never referenced).
 * 3. Tool configured with `deduplicate: false`: delivered and recorded (later calls of other
 *    tools may point to it).
 * 4. An earlier delivery with the same URI and checksum, made at turn `t` with
 *    `turn - t <= lookbackTurns` and not forgotten: replaced by a reference to the earliest such
 *    delivery, unless the reference message is not shorter than the content, in UTF-8 bytes and
 *    in o200k_base tokens (a reference never costs more than what it replaces).
 * 5. Otherwise delivered and recorded. When every matching delivery is older than the lookback
 *    (`turn - t > lookbackTurns`), this new delivery is the one later references point to.
 * @module
 */
import {
  describe,
  expectArray,
  expectKnownKeys,
  expectObject,
  expectOptions,
  isArrayOrRevoked,
  optionalBoolean,
  optionalNumber,
  rangeError,
  show,
  typeError,
} from '../validation.js';
import { native } from '../native.js';
import { deprecatedAlias } from '../deprecated.js';
import { compileTemplate } from './template.js';
import { resolveTokenCounter, tokenCounter, type TokenCounter, type TokenCounterOption } from '../tokens.js';

/** Resource content delivered to the model. */
export interface ResourceBlock {
  type: 'resource';
  /** Opaque identifier, compared exactly (no canonicalization). */
  uri: string;
  /** A well-formed string (checksummed as UTF-8) or raw bytes (checksummed as given). */
  content: string | Uint8Array;
  mimeType?: string;
}

/** Plain text; always passes through. */
export interface TextBlock {
  type: 'text';
  text: string;
}

/** One block of a tool response. */
export type ContentBlock = ResourceBlock | TextBlock;

/** Where a delivery happened. */
export type DeliveryLocation = { kind: 'attachment'; turn: number } | { kind: 'tool'; turn: number; tool: string; callId: string };

/** Per-tool settings. */
export interface ToolDedupSettings {
  /** `false` delivers this tool's output in full every time. Default `true`. */
  deduplicate?: boolean;
}

/** The plain-data settings of a ledger (also what the TOML loader returns). */
export interface ResourceDedupSettings {
  /** Conversation-level switch. Default `true`. */
  enabled?: boolean;
  /** Blocks whose raw content is at most this many bytes are always delivered. Default `300`. */
  minBytes?: number;
  /**
   * A delivery made at turn `t` can be referenced up to turn `t + lookbackTurns`; later, the
   * content is delivered again in full. Default `30`.
   */
  lookbackTurns?: number;
  /** Settings by tool name. */
  tools?: Record<string, ToolDedupSettings>;
}

/** What a reference message may say. */
export interface ResourceReferenceInfo {
  uri: string;
  /** Full lowercase hex SHA-256 of the content. */
  sha256: string;
  /** `sha256:` followed by the first 12 hex digits. */
  checksum: string;
  /** Content size in bytes. */
  bytes: number;
  mimeType?: string;
  /** The delivery the reference points to. */
  original: DeliveryLocation;
  /** `original` in words: "the attachment at turn 3" or "tool call `c7` in turn 3". */
  location: string;
}

/** Options of {@link ResourceLedger}. */
export interface ResourceLedgerOptions extends ResourceDedupSettings {
  /**
   * Reference message: a template (`{uri}`, `{checksum}`, `{sha256}`, `{location}`, `{turn}`,
   * `{bytes}`, `{mimeType}` are filled in) or a function. Default {@link DEFAULT_RESOURCE_TEMPLATE}.
   */
  reference?: string | ((info: ResourceReferenceInfo) => string);
  /**
   * Token counter for the reports: an encoding name or a function. Default `o200k_base`. Byte
   * contents are counted as their UTF-8 text when valid, else as their base64 encoding.
   */
  countTokens?: TokenCounterOption;
}

/** A user attachment, recorded with {@link ResourceLedger.recordAttachment}. */
export interface Attachment {
  uri: string;
  content: string | Uint8Array;
  turn: number;
  mimeType?: string;
}

/** A tool response, rewritten by {@link ResourceLedger.process}. */
export interface ToolResponse<B extends ContentBlock = ContentBlock> {
  turn: number;
  tool: string;
  callId: string;
  blocks: readonly B[];
}

/** Why a resource block was delivered in full. */
export type DeliveryReason = 'new' | 'changed' | 'expired' | 'small' | 'opted-out' | 'disabled' | 'not-shorter' | 'unsupported';

/** What happened to one resource block. */
export type ResourceDecision =
  | {
      action: 'referenced';
      /** Index of the block in the response. */
      index: number;
      uri: string;
      bytes: number;
      sha256: string;
      /** The delivery the reference points to. */
      original: DeliveryLocation;
      /** Content bytes minus reference bytes (UTF-8). */
      bytesSaved: number;
      /** Content tokens minus reference tokens. */
      tokensSaved: number;
      /** The replaced block itself (what {@link restoreResources} puts back). */
      block: ResourceBlock;
    }
  | {
      action: 'delivered';
      index: number;
      uri: string;
      bytes: number;
      /** Absent for `small` and `disabled` blocks, which are not checksummed. */
      sha256?: string;
      /**
       * `new`: URI never delivered; `changed`: URI delivered with other content; `expired`: same
       * content, but every earlier delivery is older than the lookback; `small`: at most
       * `minBytes`; `opted-out`: the tool has `deduplicate: false`; `disabled`: the ledger is
       * disabled; `not-shorter`: the reference would not be shorter than the content (in UTF-8
       * bytes or in o200k_base tokens); `unsupported` ({@link ResourceLedger.processToolResult}
       * only): an embedded resource the MCP SDK accepts but whose content cannot be checksummed
       * faithfully (a `text` with a lone surrogate, a `blob` that is not strict base64, e.g.
       * MIME-style line-wrapped): passed through untouched, not recorded.
       */
      reason: DeliveryReason;
    };

/** Totals of one tool response. */
export interface ResourceStats {
  blocks: number;
  resourceBlocks: number;
  /** Resource blocks replaced by a reference. */
  matched: number;
  /** Resource blocks delivered in full. */
  delivered: number;
  /** UTF-8 bytes of all resource contents. */
  bytesBefore: number;
  /** UTF-8 bytes of what replaced them: delivered contents plus reference messages. */
  bytesAfter: number;
  bytesSaved: number;
  tokensSaved: number;
}

/** @deprecated Use {@link ResourceStats}. */
export type ResourceReport = ResourceStats;

/** Result of {@link ResourceLedger.process}. */
export interface ProcessResult<B extends ContentBlock = ContentBlock> {
  /** The response's blocks, references in place of matched resource blocks, in order. */
  blocks: (B | TextBlock)[];
  /** One entry per resource block, in order. */
  decisions: ResourceDecision[];
  stats: ResourceStats;
  /** @deprecated Use `stats` (the same object). Not enumerable: absent from JSON. */
  readonly report: ResourceStats;
}

/** Result of {@link ResourceLedger.recordAttachment}. */
export interface AttachmentRecord {
  /** Whether the ledger now knows this content (false when disabled or at most `minBytes`). */
  recorded: boolean;
  bytes: number;
  sha256?: string;
}

/**
 * One content block of an MCP `CallToolResult`, as MCP defines it: `text`, `image`, `audio`,
 * `resource_link`, or `resource` (an embedded resource with `text` or base64 `blob` content).
 */
export interface McpContentBlock {
  type: string;
  [field: string]: unknown;
}

/** An MCP `CallToolResult` (only `content` is read; every other field is kept). */
export interface McpToolResult {
  content: McpContentBlock[];
  [field: string]: unknown;
}

/** Where a tool result was delivered: {@link ResourceLedger.processToolResult}'s second argument. */
export interface ToolCallInfo {
  turn: number;
  tool: string;
  callId: string;
}

/** Totals of one MCP tool result. */
export interface ToolResultStats extends ResourceStats {
  /** Content blocks of a type MCP does not define, passed through untouched. */
  unknown: number;
}

/** @deprecated Use {@link ToolResultStats}. */
export type ToolResultReport = ToolResultStats;

/**
 * What happened to one embedded resource of an MCP tool result: a {@link ResourceDecision} whose
 * `index` is the position in `content`; a reference also carries `mcpBlock`, the replaced MCP
 * content block itself (`annotations`, `_meta` and a blob's base64 string included), which
 * {@link restoreToolResult} puts back.
 */
export type ToolResultDecision =
  | (Extract<ResourceDecision, { action: 'referenced' }> & {
      /** The original content block of the `CallToolResult` (the input's own object). */
      mcpBlock: McpContentBlock;
    })
  | Extract<ResourceDecision, { action: 'delivered' }>;

/** Result of {@link ResourceLedger.processToolResult}. */
export interface ToolResultProcessed<R extends McpToolResult = McpToolResult> {
  /** A valid `CallToolResult`: matched embedded resources became `text` blocks with references. */
  result: R;
  /** One per embedded resource, `index` its position in `result.content`. */
  decisions: ToolResultDecision[];
  stats: ToolResultStats;
  /** @deprecated Use `stats` (the same object). Not enumerable: absent from JSON. */
  readonly report: ToolResultStats;
}

/** Running totals of a ledger (persisted with it). */
export interface ResourceLedgerTotals {
  responses: number;
  resourceBlocks: number;
  matched: number;
  bytesSaved: number;
  tokensSaved: number;
}

/** A recorded delivery: never content, only its identity and location. */
export interface DeliveryRecord {
  uri: string;
  sha256: string;
  bytes: number;
  location: DeliveryLocation;
}

/** The JSON form of a ledger ({@link ResourceLedger.toJSON}, {@link ResourceLedger.fromJSON}). */
export interface ResourceLedgerJSON {
  format: typeof LEDGER_FORMAT;
  version: typeof LEDGER_VERSION;
  /** The latest turn seen, or `null` before any. */
  turn: number | null;
  settings: Required<Omit<ResourceDedupSettings, 'tools'>> & { tools: Record<string, { deduplicate: boolean }> };
  deliveries: DeliveryRecord[];
  totals: ResourceLedgerTotals;
}

/** The `format` field of a serialized ledger. */
export const LEDGER_FORMAT = 'ctxdedup/resource-ledger';
/** The `version` field of a serialized ledger. */
export const LEDGER_VERSION = 1;

/** Default reference message. */
export const DEFAULT_RESOURCE_TEMPLATE =
  '[ctxdedup] The content of {uri} has not changed ({checksum}): it is identical to {location}, which is still in this conversation.';

/** Default settings. */
export const DEFAULT_RESOURCE_SETTINGS: Readonly<Required<Omit<ResourceDedupSettings, 'tools'>>> = Object.freeze({
  enabled: true,
  minBytes: 300,
  lookbackTurns: 30,
});

const MAX_INT = Number.MAX_SAFE_INTEGER;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

function utf8Length(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/**
 * `original` in words, as `{location}` fills it.
 *
 * @throws TypeError if `location` is not an object, its `kind` is neither `'attachment'` nor
 *   `'tool'`, or a tool location's `callId` is not a string; RangeError if `turn` is not a
 *   non-negative integer.
 */
export function describeLocation(location: DeliveryLocation): string {
  const loc: unknown = location;
  expectObject(loc, 'location');
  const kind = loc['kind'];
  if (kind !== 'attachment' && kind !== 'tool') typeError('location.kind', `must be 'attachment' or 'tool', got ${show(kind)}`);
  const turn = readTurn(loc['turn'], 'location.turn', 0);
  if (kind === 'attachment') return `the attachment at turn ${turn}`;
  const callId = readString(loc['callId'], 'location.callId');
  return `tool call \`${callId}\` in turn ${turn}`;
}

const RESOURCE_FIELDS = ['uri', 'checksum', 'sha256', 'location', 'turn', 'bytes', 'mimeType'] as const;

function resourceTag(template: string): (info: ResourceReferenceInfo) => string {
  const fill = compileTemplate(template, RESOURCE_FIELDS);
  return (info) =>
    fill((key) => {
      switch (key) {
        case 'uri':
          return info.uri;
        case 'checksum':
          return info.checksum;
        case 'sha256':
          return info.sha256;
        case 'location':
          return info.location;
        case 'turn':
          return String(info.original.turn);
        case 'bytes':
          return String(info.bytes);
        default:
          return info.mimeType ?? '';
      }
    });
}

function referenceOf(option: unknown): (info: ResourceReferenceInfo) => string {
  if (option === undefined) return resourceTag(DEFAULT_RESOURCE_TEMPLATE);
  if (typeof option === 'string') return resourceTag(option);
  if (typeof option === 'function') {
    return (info) => {
      const text: unknown = option(info);
      if (typeof text !== 'string') typeError('options.reference()', `must return a string, got ${describe(text)}`);
      return text;
    };
  }
  return typeError('options.reference', `must be a string template or a function, got ${describe(option)}`);
}

interface Settings {
  enabled: boolean;
  minBytes: number;
  lookbackTurns: number;
  tools: Map<string, boolean>;
}

function readTools(value: unknown, path: string, into: Map<string, boolean>): void {
  if (value === undefined) return;
  expectObject(value, path);
  for (const [name, settings] of Object.entries(value)) {
    const toolPath = `${path}[${show(name)}]`;
    expectObject(settings, toolPath);
    expectKnownKeys(settings, toolPath, ['deduplicate']);
    const dedup = optionalBoolean(settings['deduplicate'], `${toolPath}.deduplicate`, true);
    into.set(name, dedup);
  }
}

function readSettings(source: Record<string, unknown>, path: string, base: Settings): Settings {
  const tools = new Map(base.tools);
  readTools(source['tools'], `${path}.tools`, tools);
  return {
    enabled: optionalBoolean(source['enabled'], `${path}.enabled`, base.enabled),
    minBytes: optionalNumber(source['minBytes'], `${path}.minBytes`, base.minBytes, { min: 0, max: MAX_INT, integer: true }),
    lookbackTurns: optionalNumber(source['lookbackTurns'], `${path}.lookbackTurns`, base.lookbackTurns, {
      min: 0,
      max: MAX_INT,
      integer: true,
    }),
    tools,
  };
}

function defaults(): Settings {
  return { ...DEFAULT_RESOURCE_SETTINGS, tools: new Map() };
}

function readTurn(value: unknown, path: string, current: number): number {
  if (typeof value !== 'number') typeError(path, `must be a number, got ${describe(value)}`);
  if (!Number.isInteger(value) || value < 0 || value > MAX_INT) rangeError(path, `must be a non-negative integer, got ${value}`);
  if (value < current) rangeError(path, `is ${value}, but the conversation is already at turn ${current} (turns cannot go backwards)`);
  return value;
}

function readString(value: unknown, path: string): string {
  if (typeof value !== 'string') typeError(path, `must be a string, got ${describe(value)}`);
  return value;
}

function readContent(value: unknown, path: string): string | Uint8Array {
  if (typeof value === 'string') {
    if (!value.isWellFormed()) {
      typeError(
        path,
        'contains a lone surrogate, so its SHA-256 cannot be computed faithfully (it has no UTF-8 encoding); pass the content as bytes (a Uint8Array) instead',
      );
    }
    return value;
  }
  if (value instanceof Uint8Array) return value;
  return typeError(path, `must be a string or a Uint8Array, got ${describe(value)}`);
}

function readMimeType(value: unknown, path: string): void {
  if (value !== undefined && typeof value !== 'string') typeError(path, `must be a string if present, got ${describe(value)}`);
}

/** Validated resource blocks of a response: their positions, URIs and contents. */
interface ResourceInput {
  index: number[];
  uris: string[];
  contents: (string | Uint8Array)[];
}

function readBlocks(blocks: unknown, path: string): ResourceInput {
  expectArray(blocks, path);
  const input: ResourceInput = { index: [], uris: [], contents: [] };
  // A plain loop with paths built only on error: this runs for every block of every response.
  for (let i = 0; i < blocks.length; i++) {
    const block: unknown = blocks[i];
    if (typeof block !== 'object' || block === null || isArrayOrRevoked(block)) expectObject(block, `${path}[${i}]`);
    const b = block as Record<string, unknown>;
    const type = b['type'];
    if (type === 'text') {
      if (typeof b['text'] !== 'string') readString(b['text'], `${path}[${i}].text`);
    } else if (type === 'resource') {
      const uri = b['uri'];
      const content = b['content'];
      const mimeType = b['mimeType'];
      if (typeof uri !== 'string') readString(uri, `${path}[${i}].uri`);
      const ok = content instanceof Uint8Array || (typeof content === 'string' && content.isWellFormed());
      if (!ok) readContent(content, `${path}[${i}].content`);
      if (mimeType !== undefined && typeof mimeType !== 'string') readMimeType(mimeType, `${path}[${i}].mimeType`);
      input.index.push(i);
      input.uris.push(uri as string);
      input.contents.push(content as string | Uint8Array);
    } else {
      typeError(`${path}[${i}].type`, `must be 'resource' or 'text', got ${typeof type === 'string' ? show(type) : describe(type)}`);
    }
  }
  return input;
}

/** Reused between batches (a fresh buffer is mapped page by page on first touch, which costs more
 * than filling it); one of at most {@link KEPT_PACK_BYTES} is kept. */
let packBuffer: Buffer = Buffer.allocUnsafe(0);
const KEPT_PACK_BYTES = 16 << 20;

/**
 * Byte lengths of a batch, and the checksums of the contents longer than `minBytes` from one
 * native call. Strings are measured here (`Buffer.byteLength`), and the contents to hash are
 * packed into one buffer (strings written as UTF-8 by `Buffer.write`, bytes copied) with the end
 * of each, which the native side hashes in place: 5 to 13% faster than the string reader it
 * replaces (bench/resources.bench.ts batches and 10 × 1 KB blocks per response).
 * @internal
 */
export function checksums(contents: readonly (string | Uint8Array)[], minBytes: number): { bytes: Float64Array; sha: (string | undefined)[] } {
  const bytes = new Float64Array(contents.length);
  let hashed = 0;
  let total = 0;
  for (let i = 0; i < contents.length; i++) {
    const content = contents[i] as string | Uint8Array;
    const size = typeof content === 'string' ? Buffer.byteLength(content, 'utf8') : content.byteLength;
    bytes[i] = size;
    if (size > minBytes) {
      hashed++;
      total += size;
    }
  }
  const sha = new Array<string | undefined>(contents.length);
  if (hashed === 0) return { bytes, sha };
  if (total > 0xffff_ffff) rangeError('resource contents', `of one batch total ${total} bytes to checksum, more than 4 GiB`);
  let pack = packBuffer;
  if (pack.length < total) {
    pack = Buffer.allocUnsafe(Math.max(total, 2 * pack.length));
    if (pack.length <= KEPT_PACK_BYTES) packBuffer = pack;
  }
  const ends = new Uint32Array(hashed);
  let at = 0;
  for (let i = 0, k = 0; i < contents.length; i++) {
    if ((bytes[i] as number) <= minBytes) continue;
    const content = contents[i] as string | Uint8Array;
    if (typeof content === 'string') {
      // As many UTF-8 bytes as UTF-16 units: pure ASCII, whose Latin-1 write is a plain copy.
      at += pack.write(content, at, bytes[i] === content.length ? 'latin1' : 'utf8');
    } else {
      pack.set(content, at);
      at += content.byteLength;
    }
    ends[k++] = at;
  }
  const hex = native.resourceChecksums(pack, ends, minBytes);
  let next = 0;
  for (let i = 0; i < contents.length; i++) {
    if ((bytes[i] as number) > minBytes) {
      sha[i] = hex.slice(next, next + 64);
      next += 64;
    }
  }
  return { bytes, sha };
}

/**
 * The text whose tokens a content costs: a string as is; bytes that are valid UTF-8 as that text;
 * other bytes as base64, the form binary resources take in a model's context (e.g. MCP `blob`).
 */
function contentText(content: string | Uint8Array): string {
  if (typeof content === 'string') return content;
  try {
    return strictUtf8.decode(content);
  } catch {
    return Buffer.from(content.buffer, content.byteOffset, content.byteLength).toString('base64');
  }
}

function emptyTotals(): ResourceLedgerTotals {
  return { responses: 0, resourceBlocks: 0, matched: 0, bytesSaved: 0, tokensSaved: 0 };
}

/** MCP content block types that pass through untouched. */
const MCP_OTHER_BLOCKS: ReadonlySet<string> = new Set(['text', 'image', 'audio', 'resource_link']);
/** Standard base64 (padding optional, no whitespace): the `blob` of an MCP embedded resource. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;

/** Whether `atob` reads `text` (the MCP SDK's base64 check: ASCII whitespace and missing padding allowed). */
function atobAccepts(text: string): boolean {
  try {
    atob(text);
    return true;
  } catch {
    return false;
  }
}

/** An embedded resource passed through untouched (see the `unsupported` delivery reason). */
interface Unsupported {
  /** Position in `content`. */
  index: number;
  uri: string;
  bytes: number;
}

/**
 * The embedded resources of an MCP tool result as ledger blocks, with their positions, and the
 * ones whose content cannot be checksummed faithfully (passed through).
 */
/** Whether MCP `annotations` let the model see a block (no `audience`, or one naming `assistant`). */
function forTheModel(annotations: unknown): boolean {
  if (typeof annotations !== 'object' || annotations === null) return true;
  const audience = (annotations as Record<string, unknown>)['audience'];
  return !Array.isArray(audience) || audience.includes('assistant');
}

function mcpResources(content: unknown, path: string): { blocks: ResourceBlock[]; index: number[]; unknown: number; unsupported: Unsupported[] } {
  expectArray(content, path);
  const out = { blocks: [] as ResourceBlock[], index: [] as number[], unknown: 0, unsupported: [] as Unsupported[] };
  for (let i = 0; i < content.length; i++) {
    const block: unknown = content[i];
    expectObject(block, `${path}[${i}]`);
    const type = block['type'];
    if (typeof type !== 'string') typeError(`${path}[${i}].type`, `must be a string, got ${describe(type)}`);
    if (type !== 'resource') {
      if (!MCP_OTHER_BLOCKS.has(type)) out.unknown++;
      continue;
    }
    // A block annotated for an audience without the assistant is for the user only: a host that
    // honours the annotation never shows it to the model, so it is neither replaced nor recorded
    // as delivered (a later reference to it could point at nothing the model saw).
    if (!forTheModel(block['annotations'])) continue;
    const at = `${path}[${i}].resource`;
    const resource: unknown = block['resource'];
    expectObject(resource, at);
    const uri = readString(resource['uri'], `${at}.uri`);
    readMimeType(resource['mimeType'], `${at}.mimeType`);
    const text = resource['text'];
    const blob = resource['blob'];
    let data: string | Uint8Array;
    if (typeof text === 'string') {
      // A lone surrogate has no UTF-8 encoding, so no faithful checksum: the block passes through
      // (the MCP SDK accepts it; JSON carries it as an escape).
      if (!text.isWellFormed()) {
        out.unsupported.push({ index: i, uri, bytes: utf8Length(text) });
        continue;
      }
      data = text;
    } else if (typeof blob === 'string') {
      // Bytes, checksummed as bytes: never decoded as text. Base64 in another form (MIME-style
      // line breaks, other whitespace) is accepted by the MCP SDK but not read here: passed through.
      if (!BASE64.test(blob)) {
        // Not base64 even as `atob` (and so the MCP SDK) reads it: malformed.
        if (!atobAccepts(blob)) typeError(`${at}.blob`, 'must be base64 (A-Z, a-z, 0-9, +, /, optional = padding)');
        out.unsupported.push({ index: i, uri, bytes: Buffer.from(blob, 'base64').byteLength });
        continue;
      }
      data = new Uint8Array(Buffer.from(blob, 'base64'));
    } else {
      typeError(at, `must have a string \`text\` or a base64 string \`blob\`, got text ${describe(text)} and blob ${describe(blob)}`);
    }
    const rb: ResourceBlock = { type: 'resource', uri, content: data };
    if (typeof resource['mimeType'] === 'string') rb.mimeType = resource['mimeType'];
    out.blocks.push(rb);
    out.index.push(i);
  }
  return out;
}

/**
 * {@link ResourceLedger.processToolResult} plus a function that takes back exactly what it
 * recorded (deliveries, totals, the turn), for a caller that could not hand the result on
 * (`ctxdedup/mcp` when `onResult` throws). Set by the class's static block.
 * @internal
 */
export let processToolResultUndoable: <R extends McpToolResult>(
  ledger: ResourceLedger,
  result: R,
  call: ToolCallInfo,
) => { processed: ToolResultProcessed<R>; undo: () => void };

/**
 * The resource deliveries of one conversation, and the rewriting of new tool responses.
 *
 * @example
 * const ledger = new ResourceLedger({ tools: { run_tests: { deduplicate: false } } });
 * ledger.recordAttachment({ uri: 'file:///src/foo.rs', content: fooRs, turn: 1 });
 * const { blocks, stats } = ledger.process({ turn: 3, tool: 'read_file', callId: 'c1', blocks: toolBlocks });
 * // blocks: the foo.rs resource block is now a short reference to "the attachment at turn 1"
 */
export class ResourceLedger {
  #settings: Settings;
  #reference: (info: ResourceReferenceInfo) => string;
  #countTokens: TokenCounter;
  /** uri -> checksum -> deliveries, oldest first. */
  #byUri = new Map<string, Map<string, DeliveryRecord[]>>();
  #turn = -1;
  #totals = emptyTotals();
  /** Token counts by checksum, computed on first match (memory only). */
  #tokenCache = new Map<string, number>();
  /** Whether `#countTokens` is the built-in o200k_base counter (the net-positive rule's). */
  #o200k: boolean;

  /**
   * @throws TypeError / RangeError naming the option (`options.minBytes must be in [0, ...]`).
   */
  constructor(options?: ResourceLedgerOptions) {
    expectOptions(options);
    const o = (options ?? {}) as Record<string, unknown>;
    expectKnownKeys(o, 'options', ['enabled', 'minBytes', 'lookbackTurns', 'tools', 'reference', 'countTokens']);
    this.#settings = readSettings(o, 'options', defaults());
    this.#reference = referenceOf(o['reference']);
    this.#countTokens = resolveTokenCounter(o['countTokens'], 'options.countTokens');
    this.#o200k = this.#countTokens === tokenCounter('o200k_base');
  }

  /** The effective settings (a copy). */
  get settings(): ResourceLedgerJSON['settings'] {
    const { enabled, minBytes, lookbackTurns, tools } = this.#settings;
    // fromEntries defines own properties, so a tool named `__proto__` stays a plain key.
    const out = Object.fromEntries([...tools].map(([name, deduplicate]) => [name, { deduplicate }]));
    return { enabled, minBytes, lookbackTurns, tools: out };
  }

  /** The latest turn seen, or `null` before any. */
  get turn(): number | null {
    return this.#turn < 0 ? null : this.#turn;
  }

  /** Running totals over every processed response. */
  get totals(): ResourceLedgerTotals {
    return { ...this.#totals };
  }

  /** Every recorded delivery, oldest first (copies). */
  deliveries(): DeliveryRecord[] {
    const all: DeliveryRecord[] = [];
    for (const byChecksum of this.#byUri.values()) {
      for (const list of byChecksum.values()) for (const d of list) all.push({ ...d, location: { ...d.location } });
    }
    return all.sort((a, b) => a.location.turn - b.location.turn);
  }

  /**
   * Records a user attachment delivered in full at `turn` (attachments are never rewritten).
   *
   * @throws TypeError if `uri` is not a string, `content` is neither a string nor a Uint8Array,
   *   or is a string with a lone surrogate (pass bytes instead); RangeError if `turn` is not a
   *   non-negative integer or is before the latest turn seen.
   */
  recordAttachment(attachment: Attachment): AttachmentRecord {
    expectObject(attachment, 'attachment');
    const uri = readString(attachment['uri'], 'attachment.uri');
    const content = readContent(attachment['content'], 'attachment.content');
    readMimeType(attachment['mimeType'], 'attachment.mimeType');
    const turn = readTurn(attachment['turn'], 'attachment.turn', this.#turn);
    const { enabled, minBytes } = this.#settings;
    const { bytes, sha } = checksums([content], enabled ? minBytes : MAX_INT);
    this.#turn = turn;
    const size = bytes[0] as number;
    const sha256 = sha[0];
    if (sha256 === undefined) return { recorded: false, bytes: size };
    this.#add({ uri, sha256, bytes: size, location: { kind: 'attachment', turn } });
    return { recorded: true, bytes: size, sha256 };
  }

  /**
   * Rewrites a tool response block by block (see the module rules) and records what it delivers.
   * Input is validated in full before anything is recorded; on error the ledger is unchanged.
   *
   * @returns the blocks to send to the model, one decision per resource block, and totals.
   * @throws TypeError naming the path (`response.blocks[2].uri must be a string`) for a missing or
   *   non-string URI, tool or call id, content that is neither a string nor a Uint8Array, a string
   *   content with a lone surrogate (pass bytes instead), or an unknown block type; RangeError for
   *   a negative or non-integer turn, or a turn before the latest one seen.
   */
  process<B extends ContentBlock>(response: ToolResponse<B>): ProcessResult<B> {
    return this.#process(response).processed;
  }

  /** {@link ResourceLedger.process}, and a function that takes back what it recorded. */
  #process<B extends ContentBlock>(response: ToolResponse<B>): { processed: ProcessResult<B>; undo: () => void } {
    expectObject(response, 'response');
    const turn = readTurn(response['turn'], 'response.turn', this.#turn);
    const tool = readString(response['tool'], 'response.tool');
    const callId = readString(response['callId'], 'response.callId');
    const blocks = response['blocks'] as readonly B[];
    const input = readBlocks(blocks, 'response.blocks');
    const { enabled, minBytes, lookbackTurns } = this.#settings;
    const optedOut = this.#settings.tools.get(tool) === false;
    const { bytes, sha } = checksums(input.contents, enabled ? minBytes : MAX_INT);

    // Plan everything first (user callbacks may throw), then commit.
    const location: DeliveryLocation = { kind: 'tool', turn, tool, callId };
    const out: (B | TextBlock)[] = blocks.slice();
    const decisions: ResourceDecision[] = [];
    const pending: DeliveryRecord[] = [];
    // This response's deliveries by URI and checksum (the first of each): looked up per block.
    const pendingByUri = new Map<string, Map<string, DeliveryRecord>>();
    const tokenUpdates = new Map<string, number>();
    let bytesBefore = 0;
    let bytesAfter = 0;
    let tokensSaved = 0;
    let matched = 0;
    for (let k = 0; k < input.index.length; k++) {
      const index = input.index[k] as number;
      const uri = input.uris[k] as string;
      const size = bytes[k] as number;
      const sha256 = sha[k];
      bytesBefore += size;
      let reason: DeliveryReason;
      if (!enabled) {
        reason = 'disabled';
      } else if (sha256 === undefined) {
        reason = 'small';
      } else if (optedOut) {
        reason = 'opted-out';
      } else {
        const found = this.#lookup(uri, sha256, turn, lookbackTurns, pendingByUri.get(uri));
        if (found.original === undefined) {
          reason = found.reason;
        } else {
          const block = blocks[index] as unknown as ResourceBlock;
          const info: ResourceReferenceInfo = {
            uri,
            sha256,
            checksum: `sha256:${sha256.slice(0, 12)}`,
            bytes: size,
            original: { ...found.original.location },
            location: describeLocation(found.original.location),
          };
          if (block.mimeType !== undefined) info.mimeType = block.mimeType;
          const text = this.#reference(info);
          const referenceBytes = utf8Length(text);
          let contentTokens = this.#tokenCache.get(sha256) ?? tokenUpdates.get(sha256);
          const countContent = (): number => {
            if (contentTokens === undefined) {
              contentTokens = this.#countTokens(contentText(block.content));
              tokenUpdates.set(sha256, contentTokens);
            }
            return contentTokens;
          };
          const referenceTokens = referenceBytes >= size ? 0 : this.#countTokens(text);
          if (referenceBytes >= size || !this.#shorterInTokens(text, referenceTokens, block.content, countContent)) {
            reason = 'not-shorter';
          } else {
            const saved = countContent() - referenceTokens;
            out[index] = { type: 'text', text };
            bytesAfter += referenceBytes;
            tokensSaved += saved;
            matched++;
            decisions.push({
              action: 'referenced',
              index,
              uri,
              bytes: size,
              sha256,
              original: info.original,
              bytesSaved: size - referenceBytes,
              tokensSaved: saved,
              block,
            });
            continue;
          }
        }
      }
      bytesAfter += size;
      if (sha256 === undefined) {
        decisions.push({ action: 'delivered', index, uri, bytes: size, reason });
      } else {
        decisions.push({ action: 'delivered', index, uri, bytes: size, sha256, reason });
        const record: DeliveryRecord = { uri, sha256, bytes: size, location };
        pending.push(record);
        let byChecksum = pendingByUri.get(uri);
        if (byChecksum === undefined) pendingByUri.set(uri, (byChecksum = new Map()));
        if (!byChecksum.has(sha256)) byChecksum.set(sha256, record);
      }
    }

    const previousTurn = this.#turn;
    this.#turn = turn;
    for (const d of pending) this.#add(d);
    for (const [key, n] of tokenUpdates) this.#tokenCache.set(key, n);
    const stats: ResourceStats = {
      blocks: blocks.length,
      resourceBlocks: input.index.length,
      matched,
      delivered: input.index.length - matched,
      bytesBefore,
      bytesAfter,
      bytesSaved: bytesBefore - bytesAfter,
      tokensSaved,
    };
    const t = this.#totals;
    t.responses++;
    t.resourceBlocks += stats.resourceBlocks;
    t.matched += matched;
    t.bytesSaved += stats.bytesSaved;
    t.tokensSaved += tokensSaved;
    const undo = (): void => {
      const added = new Set(pending);
      this.#remove((d) => added.has(d));
      t.responses--;
      t.resourceBlocks -= stats.resourceBlocks;
      t.matched -= matched;
      t.bytesSaved -= stats.bytesSaved;
      t.tokensSaved -= tokensSaved;
      // The turn goes back too, unless something recorded since then holds a later one.
      if (this.#turn === turn) {
        let latest = previousTurn;
        for (const byChecksum of this.#byUri.values()) {
          for (const list of byChecksum.values()) for (const d of list) latest = Math.max(latest, d.location.turn);
        }
        this.#turn = latest;
      }
    };
    return { processed: deprecatedAlias({ blocks: out, decisions, stats }, 'report', stats) as ProcessResult<B>, undo };
  }

  /**
   * Whether a reference (`text`, `referenceTokens` by the ledger's counter) has fewer o200k_base
   * tokens than the content it replaces (the net-positive rule). With the default counter the
   * content's full count (`countContent`, needed for the report anyway, cached by checksum) is
   * compared; with another counter the content is counted in o200k_base only until it passes
   * the reference's count (a few pieces, whatever its length).
   */
  #shorterInTokens(text: string, referenceTokens: number, content: string | Uint8Array, countContent: () => number): boolean {
    if (this.#o200k) return countContent() > referenceTokens;
    const o200k = native.TokenEncoding.O200kBase;
    const limit = text.length === 0 ? 0 : native.countTokens(text, o200k);
    const counted = native.countTokensBatchUpTo([contentText(content)], Uint32Array.of(limit), o200k);
    return (counted[0] as number) > limit;
  }

  /**
   * {@link ResourceLedger.process} for an MCP `CallToolResult`: embedded resources (`type:
   * 'resource'`, `text` content checksummed as UTF-8, base64 `blob` content as its bytes) are
   * matched and recorded; `text`, `image`, `audio`, `resource_link` and unknown blocks pass
   * through untouched (unknown ones are counted), and so does every field besides `content`.
   * A matched resource becomes a `text` block holding the reference, so the result stays valid;
   * its decision carries the replaced block (`mcpBlock`) for {@link restoreToolResult}. An
   * embedded resource the MCP SDK accepts but whose content cannot be checksummed faithfully (a
   * `text` with a lone surrogate, a `blob` that `atob` reads but that is not strict base64, e.g.
   * line-wrapped) passes through untouched, unrecorded, with reason `unsupported`.
   * Input is validated in full before anything is recorded; on error the ledger is unchanged.
   *
   * @throws TypeError naming the path (`result.content[2].resource.uri must be a string`,
   *   `call.tool must be a string`, a `blob` that is not base64 at all); RangeError for a bad or
   *   backwards turn.
   */
  processToolResult<R extends McpToolResult>(result: R, call: ToolCallInfo): ToolResultProcessed<R> {
    return this.#processToolResult(result, call).processed;
  }

  /** {@link ResourceLedger.processToolResult}, and a function that takes back what it recorded. */
  #processToolResult<R extends McpToolResult>(result: R, call: ToolCallInfo): { processed: ToolResultProcessed<R>; undo: () => void } {
    expectObject(result, 'result');
    expectObject(call, 'call');
    const turn = readTurn(call['turn'], 'call.turn', this.#turn);
    const tool = readString(call['tool'], 'call.tool');
    const callId = readString(call['callId'], 'call.callId');
    const content = result['content'] as readonly McpContentBlock[];
    const found = mcpResources(content, 'result.content');
    const { processed, undo } = this.#process({ turn, tool, callId, blocks: found.blocks });
    const out = content.slice();
    const decisions: ToolResultDecision[] = processed.decisions.map((d) => {
      const index = found.index[d.index] as number;
      if (d.action !== 'referenced') return { ...d, index };
      out[index] = { type: 'text', text: (processed.blocks[d.index] as TextBlock).text };
      return { ...d, index, mcpBlock: content[index] as McpContentBlock };
    });
    const stats: ToolResultStats = { ...processed.stats, blocks: content.length, unknown: found.unknown };
    if (found.unsupported.length > 0) {
      // Delivered untouched, in content order among the others; counted like any delivery.
      for (const u of found.unsupported) {
        decisions.push({ action: 'delivered', index: u.index, uri: u.uri, bytes: u.bytes, reason: 'unsupported' });
        stats.resourceBlocks++;
        stats.delivered++;
        stats.bytesBefore += u.bytes;
        stats.bytesAfter += u.bytes;
      }
      decisions.sort((a, b) => a.index - b.index);
      this.#totals.resourceBlocks += found.unsupported.length;
    }
    const unsupported = found.unsupported.length;
    const undoAll = (): void => {
      undo();
      this.#totals.resourceBlocks -= unsupported;
    };
    const done = deprecatedAlias({ result: { ...result, content: out }, decisions, stats }, 'report', stats) as ToolResultProcessed<R>;
    return { processed: done, undo: undoAll };
  }

  static {
    processToolResultUndoable = (ledger, result, call) => ledger.#processToolResult(result, call);
  }

  /**
   * Forgets every delivery made in one of `turns` (their content left the context, e.g. after
   * compaction), so no reference ever points at content the model can no longer see.
   *
   * @returns the number of deliveries forgotten.
   * @throws TypeError / RangeError if `turns` is not an array of non-negative integers.
   */
  forgetTurns(turns: readonly number[]): number {
    expectArray(turns, 'turns');
    const set = new Set<number>();
    // Indexed loops, not forEach/map: a hole is `undefined` at its index and is reported as such.
    for (let i = 0; i < turns.length; i++) set.add(readTurn(turns[i], `turns[${i}]`, 0));
    return this.#remove((d) => set.has(d.location.turn));
  }

  /**
   * Forgets every delivery made before `turn` (for a conversation compacted up to that turn).
   *
   * @returns the number of deliveries forgotten.
   * @throws RangeError if `turn` is not a non-negative integer.
   */
  compactBefore(turn: number): number {
    const limit = readTurn(turn, 'turn', 0);
    return this.#remove((d) => d.location.turn < limit);
  }

  /**
   * Forgets the deliveries of the given tool calls (for a context that dropped those results).
   *
   * @returns the number of deliveries forgotten.
   * @throws TypeError if `callIds` is not an array of strings.
   */
  forgetCalls(callIds: readonly string[]): number {
    expectArray(callIds, 'callIds');
    const set = new Set<string>();
    for (let i = 0; i < callIds.length; i++) set.add(readString(callIds[i], `callIds[${i}]`));
    return this.#remove((d) => d.location.kind === 'tool' && set.has(d.location.callId));
  }

  /** The ledger as plain JSON data: settings, deliveries and totals, never content. */
  toJSON(): ResourceLedgerJSON {
    return {
      format: LEDGER_FORMAT,
      version: LEDGER_VERSION,
      turn: this.turn,
      settings: this.settings,
      deliveries: this.deliveries(),
      totals: this.totals,
    };
  }

  /**
   * Rebuilds a ledger from {@link ResourceLedger.toJSON} output (parsed or as a JSON string).
   * Settings in `options` override the saved ones; `reference` and `countTokens` are not saved.
   *
   * @throws TypeError / RangeError naming the path (`json.deliveries[3].sha256 ...`) if the data
   *   is not a valid serialized ledger.
   */
  static fromJSON(json: unknown, options?: ResourceLedgerOptions): ResourceLedger {
    const data: unknown = typeof json === 'string' ? parseJson(json) : json;
    expectObject(data, 'json');
    if (data['format'] !== LEDGER_FORMAT) typeError('json.format', `must be ${show(LEDGER_FORMAT)}, got ${show(data['format'])}`);
    if (data['version'] !== LEDGER_VERSION) rangeError('json.version', `must be ${LEDGER_VERSION}, got ${show(data['version'])}`);
    expectObject(data['settings'], 'json.settings');
    const saved = readSettings(data['settings'], 'json.settings', defaults());
    const turnValue = data['turn'];
    const turn = turnValue === null ? -1 : readTurn(turnValue, 'json.turn', 0);
    const deliveries: unknown = data['deliveries'];
    expectArray(deliveries, 'json.deliveries');
    const records: DeliveryRecord[] = [];
    for (let i = 0; i < deliveries.length; i++) records.push(readRecord(deliveries[i], `json.deliveries[${i}]`, turn));
    expectObject(data['totals'], 'json.totals');
    const totals = emptyTotals();
    for (const key of Object.keys(totals) as (keyof ResourceLedgerTotals)[]) {
      totals[key] = optionalNumber(data['totals'][key], `json.totals.${key}`, 0, {
        min: key === 'tokensSaved' || key === 'bytesSaved' ? -MAX_INT : 0,
        max: MAX_INT,
        integer: true,
      });
    }

    expectOptions(options);
    const ledger = new ResourceLedger(options);
    ledger.#settings = readSettings((options ?? {}) as Record<string, unknown>, 'options', saved);
    ledger.#turn = turn;
    ledger.#totals = totals;
    records.sort((a, b) => a.location.turn - b.location.turn);
    for (const r of records) ledger.#add(r);
    return ledger;
  }

  #add(record: DeliveryRecord): void {
    let byChecksum = this.#byUri.get(record.uri);
    if (byChecksum === undefined) {
      byChecksum = new Map();
      this.#byUri.set(record.uri, byChecksum);
    }
    const list = byChecksum.get(record.sha256);
    if (list === undefined) byChecksum.set(record.sha256, [record]);
    else list.push(record);
  }

  #lookup(
    uri: string,
    sha256: string,
    turn: number,
    lookbackTurns: number,
    /** This response's earlier deliveries of `uri`, by checksum. */
    pending: ReadonlyMap<string, DeliveryRecord> | undefined,
  ): { original: DeliveryRecord; reason?: undefined } | { original?: undefined; reason: DeliveryReason } {
    const byChecksum = this.#byUri.get(uri);
    const list = byChecksum?.get(sha256);
    if (list !== undefined) {
      for (const d of list) if (turn - d.location.turn <= lookbackTurns) return { original: d };
    }
    const same = pending?.get(sha256);
    if (same !== undefined) return { original: same };
    if (list !== undefined) return { reason: 'expired' };
    const seen = (byChecksum !== undefined && byChecksum.size > 0) || pending !== undefined;
    return { reason: seen ? 'changed' : 'new' };
  }

  #remove(drop: (d: DeliveryRecord) => boolean): number {
    let removed = 0;
    for (const [uri, byChecksum] of this.#byUri) {
      for (const [sha256, list] of byChecksum) {
        const kept = list.filter((d) => !drop(d));
        removed += list.length - kept.length;
        if (kept.length === 0) {
          byChecksum.delete(sha256);
          this.#tokenCache.delete(sha256);
        } else if (kept.length !== list.length) {
          byChecksum.set(sha256, kept);
        }
      }
      if (byChecksum.size === 0) this.#byUri.delete(uri);
    }
    return removed;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    return typeError('json', `is not valid JSON: ${(error as Error).message}`);
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

function readRecord(value: unknown, path: string, latest: number): DeliveryRecord {
  expectObject(value, path);
  const uri = readString(value['uri'], `${path}.uri`);
  const sha256 = readString(value['sha256'], `${path}.sha256`);
  if (!SHA256_HEX.test(sha256)) typeError(`${path}.sha256`, 'must be 64 lowercase hex digits');
  const bytes = optionalNumber(value['bytes'], `${path}.bytes`, Number.NaN, { min: 0, max: MAX_INT, integer: true });
  if (Number.isNaN(bytes)) typeError(`${path}.bytes`, 'is missing');
  const loc = value['location'];
  expectObject(loc, `${path}.location`);
  const turn = readTurn(loc['turn'], `${path}.location.turn`, 0);
  if (turn > latest) rangeError(`${path}.location.turn`, `is ${turn}, after the ledger's latest turn ${latest}`);
  let location: DeliveryLocation;
  if (loc['kind'] === 'attachment') {
    location = { kind: 'attachment', turn };
  } else if (loc['kind'] === 'tool') {
    location = {
      kind: 'tool',
      turn,
      tool: readString(loc['tool'], `${path}.location.tool`),
      callId: readString(loc['callId'], `${path}.location.callId`),
    };
  } else {
    return typeError(`${path}.location.kind`, `must be 'attachment' or 'tool', got ${show(loc['kind'])}`);
  }
  return { uri, sha256, bytes, location };
}

/**
 * Validates `decisions` before anything is built (indexed, so holes are reported): each
 * `referenced` one has an integer `index` into the `length` items of `where` and an object at
 * `field` (what goes back).
 */
function checkReferenced(decisions: unknown, length: number, where: string, field: 'block' | 'mcpBlock'): asserts decisions is readonly ResourceDecision[] {
  expectArray(decisions, 'decisions');
  for (let k = 0; k < decisions.length; k++) {
    const d: unknown = decisions[k];
    expectObject(d, `decisions[${k}]`);
    if (d['action'] !== 'referenced') continue;
    const index = d['index'];
    if (typeof index !== 'number') typeError(`decisions[${k}].index`, `must be a number, got ${describe(index)}`);
    if (!Number.isInteger(index) || index < 0 || index >= length) {
      rangeError(`decisions[${k}].index`, `must be an integer in [0, ${length - 1}] (a position in ${where}), got ${index}`);
    }
    expectObject(d[field], `decisions[${k}].${field}`);
  }
}

/**
 * Puts the original resource blocks back in place of their references.
 *
 * @param blocks the rewritten blocks returned by {@link ResourceLedger.process} (or the `content`
 *   of a result returned by {@link ResourceLedger.processToolResult}).
 * @param decisions the decisions returned with them (a decision with `mcpBlock` puts that back).
 * @returns a new array, equal element for element to the response's original blocks. For a whole
 *   MCP result, {@link restoreToolResult} does the same.
 */
export function restoreResources<B extends ContentBlock>(blocks: readonly (B | TextBlock)[], decisions: readonly ResourceDecision[]): B[] {
  expectArray(blocks, 'blocks');
  checkReferenced(decisions, blocks.length, 'blocks', 'block');
  const out = new Array<B>(blocks.length);
  for (let i = 0; i < blocks.length; i++) out[i] = blocks[i] as B;
  for (const d of decisions) {
    if (d.action !== 'referenced') continue;
    // A decision of processToolResult carries the MCP content block it replaced: that goes back.
    const mcpBlock: unknown = (d as { mcpBlock?: unknown }).mcpBlock;
    out[d.index] = (typeof mcpBlock === 'object' && mcpBlock !== null ? mcpBlock : d.block) as B;
  }
  return out;
}

/**
 * Puts the original MCP content blocks back in place of their references: the inverse of
 * {@link ResourceLedger.processToolResult}.
 *
 * @param result the `result` returned by {@link ResourceLedger.processToolResult} (or by a
 *   `ctxdedup/mcp` client's `callTool`).
 * @param decisions the decisions returned with it (`onResult`'s `processed.decisions`).
 * @returns a new result, deep-equal to the original `CallToolResult` (`annotations`, `_meta` and a
 *   blob's base64 string included; the restored blocks are the original objects).
 * @throws TypeError / RangeError naming the path if `result` has no `content` array or a decision
 *   is malformed.
 */
export function restoreToolResult<R extends McpToolResult>(result: R, decisions: readonly ToolResultDecision[]): R {
  expectObject(result, 'result');
  const content: unknown = result['content'];
  expectArray(content, 'result.content');
  checkReferenced(decisions, content.length, 'result.content', 'mcpBlock');
  const out = content.slice() as McpContentBlock[];
  for (const d of decisions) if (d.action === 'referenced') out[d.index] = d.mcpBlock;
  return { ...result, content: out };
}
