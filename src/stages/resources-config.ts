/**
 * Resource-ledger settings from a TOML file.
 *
 * ```toml
 * [conversation.deduplication]
 * enabled = true        # default true
 * min_bytes = 300       # default 300
 * lookback_turns = 30   # default 30
 *
 * [tools.run_tests]
 * deduplicate = false   # always deliver this tool's output in full
 * ```
 *
 * Other tables and other keys of `[tools.<name>]` are ignored (the file may configure more than
 * ctxdedup), except a key that starts with `dedup` but is not `deduplicate` (`dedupe = false`: a
 * typo that would leave the tool deduplicated); unknown keys inside `[conversation.deduplication]`
 * are errors, to catch typos.
 * @module
 */
import { readFileSync } from 'node:fs';
import { parse } from 'smol-toml';
import { describe, rangeError, typeError } from '../validation.js';
import type { ResourceDedupSettings, ToolDedupSettings } from './resources.js';

const KEYS: Record<string, 'enabled' | 'minBytes' | 'lookbackTurns'> = {
  enabled: 'enabled',
  min_bytes: 'minBytes',
  lookback_turns: 'lookbackTurns',
};

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

function table(value: unknown, path: string): Record<string, unknown> | undefined {
  if (value === undefined) return undefined;
  if (!isTable(value)) typeError(path, `must be a table, got ${describe(value)}`);
  return value;
}

function integer(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) typeError(path, `must be an integer, got ${describe(value)}`);
  if (value < 0 || value > Number.MAX_SAFE_INTEGER) rangeError(path, `must be a non-negative integer, got ${value}`);
  return value;
}

/**
 * Reads ledger settings from TOML text. `source` (a file name, say) prefixes error messages.
 *
 * @returns settings for `new ResourceLedger({ ...settings, ... })`; absent keys are left out so
 *   the defaults apply.
 * @throws TypeError if the text is not valid TOML or a value has the wrong type (the message names
 *   the key, e.g. `conversation.deduplication.min_bytes must be an integer`); RangeError if a
 *   number is negative.
 */
export function parseResourceConfig(toml: string, source = 'config'): ResourceDedupSettings {
  if (typeof toml !== 'string') typeError(source, `must be TOML text (a string), got ${describe(toml)}`);
  let doc: Record<string, unknown>;
  try {
    doc = parse(toml) as Record<string, unknown>;
  } catch (error) {
    return typeError(source, `is not valid TOML: ${(error as Error).message}`);
  }
  const at = (path: string): string => `${source}: ${path}`;
  const settings: ResourceDedupSettings = {};
  const conversation = table(doc['conversation'], at('conversation'));
  const dedup = table(conversation?.['deduplication'], at('conversation.deduplication'));
  for (const [key, value] of Object.entries(dedup ?? {})) {
    const path = at(`conversation.deduplication.${key}`);
    const field = KEYS[key];
    if (!Object.hasOwn(KEYS, key) || field === undefined) {
      typeError(path, `is not a known setting (expected one of ${Object.keys(KEYS).join(', ')})`);
    }
    if (field === 'enabled') {
      if (typeof value !== 'boolean') typeError(path, `must be a boolean, got ${describe(value)}`);
      settings.enabled = value;
    } else {
      settings[field] = integer(value, path);
    }
  }
  const tools = table(doc['tools'], at('tools'));
  if (tools !== undefined) {
    const out: [string, ToolDedupSettings][] = [];
    for (const [name, value] of Object.entries(tools)) {
      const tool = table(value, at(`tools.${name}`)) as Record<string, unknown>;
      for (const key of Object.keys(tool)) {
        if (key !== 'deduplicate' && /^dedup/i.test(key)) typeError(at(`tools.${name}.${key}`), 'is not a setting: did you mean deduplicate?');
      }
      const dedupValue = tool['deduplicate'];
      if (dedupValue === undefined) continue;
      if (typeof dedupValue !== 'boolean') typeError(at(`tools.${name}.deduplicate`), `must be a boolean, got ${describe(dedupValue)}`);
      out.push([name, { deduplicate: dedupValue }]);
    }
    // fromEntries defines own properties, so a tool named `__proto__` stays a plain key.
    settings.tools = Object.fromEntries(out);
  }
  return settings;
}

/**
 * Reads ledger settings from a TOML file (synchronously; errors name the file and the key).
 *
 * @throws the errors of {@link parseResourceConfig}; an `Error` naming the file if it cannot be
 *   read (missing, a directory, no permission), with the file system's `code` and the original
 *   error as `cause`.
 * @example new ResourceLedger({ ...loadResourceConfig('agent.toml'), countTokens: 'cl100k_base' })
 */
export function loadResourceConfig(path: string): ResourceDedupSettings {
  if (typeof path !== 'string') typeError('path', `must be a string, got ${describe(path)}`);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'EISDIR' ? 'is a directory, not a TOML file' : `cannot be read: ${(error as Error).message}`;
    throw Object.assign(new Error(`${path} ${reason}`, { cause: error }), code === undefined ? {} : { code });
  }
  return parseResourceConfig(text, path);
}
