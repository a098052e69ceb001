/**
 * Stage `research`: dedup of research sources (by URL) and findings (by normalized paragraph),
 * before a synthesis call, with token accounting and a report for a UI card.
 *
 * Findings normalization (version {@link FINDINGS_NORMALIZATION_VERSION}, implemented once in
 * ctxdedup-core `findings.rs`): a text is cut into lines at LF; paragraphs are maximal runs of
 * non-blank lines (a blank line is empty or JS-whitespace only), so two or more line feeds with
 * only whitespace between them separate paragraphs; each paragraph is trimmed. Its key is
 * `paragraph.toLowerCase().replace(/\s+/g, ' ').trim()` (JavaScript semantics exactly, lone
 * surrogates included). Keys shorter than `minChars` UTF-16 code units never deduplicate.
 * @module
 */
import { describe, expectArray, expectKnownKeys, expectObject, expectOptions, optionalBoolean, optionalNumber, rangeError, typeError } from '../validation.js';
import { native } from '../native.js';
import { deprecatedAlias } from '../deprecated.js';
import { resolveTokenCounter, type TokenCounterOption } from '../tokens.js';

/** A research source. Only the URL and credibility fields are read; the rest rides along. */
export type Source = object;

/** Options of {@link dedupeSources}. */
export interface DedupeSourcesOptions {
  /**
   * Field holding the credibility score (a finite number; missing counts as 0). Default
   * `credibility_score`. Read as an own property only, never from the prototype chain.
   */
  credibilityField?: string;
  /** Field holding the URL (an own property). Default `url`. */
  urlField?: string;
  /** Group by {@link canonicalizeUrl} of the URL instead of the exact string. Default `false`. */
  canonicalizeUrls?: boolean;
}

/** A source that was dropped, and why. */
export interface PrunedSource<S extends Source = Source> {
  /** Input index. */
  index: number;
  source: S;
  /** `no-url`: the URL is missing, empty or blank; `duplicate`: another source had the same URL key. */
  reason: 'no-url' | 'duplicate';
  /** `duplicate` only: input index of the kept source. */
  duplicateOf?: number;
  /** `duplicate` only: the URL key they share. */
  key?: string;
}

/** Totals of {@link dedupeSources}. */
export interface DedupeSourcesStats {
  /** Sources given. */
  input: number;
  /** Sources kept (`kept.length`). */
  kept: number;
  /** Sources dropped (`decisions.length`): `withoutUrl + duplicates`. */
  removed: number;
  withoutUrl: number;
  duplicates: number;
  /** @deprecated Use `input`. Not enumerable: absent from JSON. */
  readonly total: number;
  /** @deprecated Use `kept`. Not enumerable: absent from JSON. */
  readonly unique: number;
  /** @deprecated Use `removed`. Not enumerable: absent from JSON. */
  readonly pruned: number;
}

/** Result of {@link dedupeSources}. */
export interface DedupeSourcesResult<S extends Source = Source> {
  /** One source per URL: the most credible (ties: the first), sorted by credibility, descending (stable). */
  kept: S[];
  /** One per dropped source, in input order, with the reason. */
  decisions: PrunedSource<S>[];
  stats: DedupeSourcesStats;
  /** @deprecated Use `kept` (the same array). Not enumerable: absent from JSON. */
  readonly unique: S[];
  /** @deprecated Use `decisions` (the same array). Not enumerable: absent from JSON. */
  readonly pruned: PrunedSource<S>[];
}

/** Options of {@link dedupeFindings}. */
export interface DedupeFindingsOptions {
  /** Keys shorter than this (UTF-16 code units) are never deduplicated. Default `20`. */
  minChars?: number;
  /** Token counter: an encoding name or a function. Default `o200k_base`. */
  countTokens?: TokenCounterOption;
}

/** A paragraph removed as a repeat of an earlier one. */
export interface FindingDuplicate {
  /** Index of the findings text it came from. */
  finding: number;
  /** The removed paragraph (trimmed). */
  paragraph: string;
  /** Index of the findings text holding the first occurrence. */
  duplicateOfFinding: number;
  /** The first occurrence (kept). */
  duplicateOfParagraph: string;
  /**
   * @deprecated Use `duplicateOfParagraph` (`duplicateOf` names the kept item, an index or id,
   * everywhere else). Not enumerable: absent from JSON.
   */
  readonly duplicateOf: string;
}

/** Totals of {@link dedupeFindings}. */
export interface DedupeFindingsStats {
  /** Paragraphs found. */
  paragraphs: number;
  /** Paragraphs kept. */
  kept: number;
  /** Paragraphs removed (`decisions.length`). */
  removed: number;
  /** Tokens of `text`. */
  tokens: number;
  /** Tokens of every paragraph joined the same way, duplicates included. */
  naiveTokens: number;
  /** `naiveTokens - tokens`. */
  tokensSaved: number;
}

/** Result of {@link dedupeFindings}. */
export interface DedupeFindingsResult {
  /** Kept paragraphs, in order, joined by a blank line (`\n\n`). */
  text: string;
  /** One per removed paragraph, in order. */
  decisions: FindingDuplicate[];
  stats: DedupeFindingsStats;
  /** @deprecated Use `decisions` (the same array). Not enumerable: absent from JSON. */
  readonly duplicates: FindingDuplicate[];
  /** @deprecated Use `stats.removed`. Not enumerable: absent from JSON. */
  readonly removed: number;
  /** @deprecated Use `stats.tokensSaved`. Not enumerable: absent from JSON. */
  readonly tokensSaved: number;
  /** @deprecated Use `stats.tokens`. Not enumerable: absent from JSON. */
  readonly tokens: number;
  /** @deprecated Use `stats.naiveTokens`. Not enumerable: absent from JSON. */
  readonly naiveTokens: number;
  /** @deprecated Use `stats.paragraphs`. Not enumerable: absent from JSON. */
  readonly paragraphs: number;
  /** @deprecated Use `stats.kept`. Not enumerable: absent from JSON. */
  readonly kept: number;
}

/** One line of a stage card. */
export interface StageReportItem {
  label: string;
  value: number | string;
}

/** A stage report shaped for a UI card. */
export interface StageReport {
  stage: 'deduplication';
  tokens: number;
  naiveTokens: number;
  /** `(naiveTokens - tokens) / naiveTokens * 100`, one decimal; 0 when there were no tokens. */
  savedPercent: number;
  items: StageReportItem[];
}

/** Version of the findings paragraph splitting and key (from the native core). */
export const FINDINGS_NORMALIZATION_VERSION: number = native.findingsNormalizationVersion();

function isUtmName(pair: string): boolean {
  const eq = pair.indexOf('=');
  return (eq < 0 ? pair : pair.slice(0, eq)).toLowerCase().startsWith('utm_');
}

/**
 * A canonical form of a URL, for grouping: WHATWG URL parsing, lowercase scheme and host, no
 * fragment, no `utm_*` query parameters (name compared case-insensitively; the other parameters
 * are kept byte for byte, in order), no default port, no trailing slash on the path.
 * A string that does not parse as a URL is returned unchanged, and so is one whose host (with its
 * port) is longer than 1,024 characters: no DNS name is, and the parser's
 * conversion of a non-ASCII host to ASCII takes time quadratic in its length.
 *
 * @example canonicalizeUrl('HTTPS://Example.com:443/a/?utm_source=x&q=1#top') // 'https://example.com/a?q=1'
 */
export function canonicalizeUrl(url: string): string {
  if (typeof url !== 'string') typeError('url', `must be a string, got ${describe(url)}`);
  if (hostTooLong(url)) return url;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  parsed.hash = '';
  if (parsed.hostname !== '') parsed.hostname = parsed.hostname.toLowerCase();
  if (parsed.search !== '') {
    const kept = parsed.search
      .slice(1)
      .split('&')
      .filter((pair) => pair !== '' && !isUtmName(pair));
    parsed.search = kept.length === 0 ? '' : `?${kept.join('&')}`;
  } else {
    // An empty query (`b?`) has `search === ''` but keeps its `?` in `href`: drop it.
    parsed.search = '';
  }
  const href = parsed.href;
  const tail = parsed.pathname.length + parsed.search.length;
  const head = href.slice(0, href.length - tail);
  const path = parsed.pathname.endsWith('/') ? parsed.pathname.slice(0, -1) : parsed.pathname;
  return `${head}${path}${parsed.search}`;
}

/** Longest host (with its port) {@link canonicalizeUrl} parses; a DNS name has at most 253 characters. */
const MAX_HOST_UNITS = 1024;

/** A URL's scheme, the slashes after it and its authority (tabs, line breaks, outer spaces cut). */
const AUTHORITY = /^([A-Za-z][A-Za-z0-9+.-]*):([/\\]*)([^/?#\\]*)/;

/** The schemes whose host the URL parser converts to ASCII (any other host is opaque: copied). */
const SPECIAL_SCHEMES = new Set(['http', 'https', 'ws', 'wss', 'ftp', 'file']);

/**
 * Whether `url` has a special scheme and a host (with its port) longer than
 * {@link MAX_HOST_UNITS}, read as the parser reads it: leading and trailing controls and spaces
 * trimmed, every tab and line break removed, the host ending at the first `/`, `?`, `#` or
 * backslash after the last `@` of the authority (a `file:` URL has a host only after exactly two
 * slashes). The parser's host is at most this long.
 */
function hostTooLong(url: string): boolean {
  const text = /[\t\n\r]/.test(url) ? url.replace(/[\t\n\r]/g, '') : url;
  let start = 0;
  while (start < text.length && text.charCodeAt(start) <= 0x20) start++;
  let end = text.length;
  while (end > start && text.charCodeAt(end - 1) <= 0x20) end--;
  const found = AUTHORITY.exec(start === 0 && end === text.length ? text : text.slice(start, end));
  if (found === null) return false;
  const scheme = (found[1] as string).toLowerCase();
  if (!SPECIAL_SCHEMES.has(scheme) || (scheme === 'file' && (found[2] as string).length !== 2)) return false;
  const authority = found[3] as string;
  return authority.length - authority.lastIndexOf('@') - 1 > MAX_HOST_UNITS;
}

/** `record[key]` if it is an own property, else `undefined` (never the prototype chain). */
function ownField(record: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

function readField(options: Record<string, unknown>, key: string, fallback: string): string {
  const value = options[key];
  if (value === undefined) return fallback;
  if (typeof value !== 'string') typeError(`options.${key}`, `must be a string, got ${describe(value)}`);
  return value;
}

/**
 * Groups sources by URL and keeps the most credible of each group.
 *
 * @returns the survivors sorted by credibility (descending, stable; the same object references)
 *   and every pruned source with its reason.
 * @throws TypeError naming the path if `sources` is not an array of objects, a URL is present but
 *   not a string, or a credibility is present but not a number; RangeError if it is NaN or
 *   infinite.
 * @example
 * dedupeSources([{ url: 'a', credibility_score: 0.2 }, { url: 'a', credibility_score: 0.9 }]).kept
 * // -> [{ url: 'a', credibility_score: 0.9 }]
 */
export function dedupeSources<S extends Source>(sources: readonly S[], options?: DedupeSourcesOptions): DedupeSourcesResult<S> {
  expectArray(sources, 'sources');
  expectOptions(options);
  const o = (options ?? {}) as Record<string, unknown>;
  expectKnownKeys(o, 'options', ['credibilityField', 'urlField', 'canonicalizeUrls']);
  const credibilityField = readField(o, 'credibilityField', 'credibility_score');
  const urlField = readField(o, 'urlField', 'url');
  const canonical = optionalBoolean(o['canonicalizeUrls'], 'options.canonicalizeUrls', false);

  const pruned: PrunedSource<S>[] = [];
  const indices: number[] = [];
  const keys: string[] = [];
  // Grown as the sources are read: a huge holey array fails on its first hole, not on allocation.
  const all: number[] = [];
  // An indexed loop, not forEach: a hole is `undefined` at its index and is reported as such.
  for (let i = 0; i < sources.length; i++) {
    const source: unknown = sources[i];
    expectObject(source, `sources[${i}]`);
    // Field names come from the caller: read own properties only (`__proto__` is not a field).
    const score = ownField(source, credibilityField);
    if (score !== undefined) {
      if (typeof score !== 'number') typeError(`sources[${i}].${credibilityField}`, `must be a number, got ${describe(score)}`);
      if (!Number.isFinite(score)) rangeError(`sources[${i}].${credibilityField}`, `must be finite, got ${score}`);
    }
    all.push((score as number | undefined) ?? 0);
    const url = ownField(source, urlField);
    if (url === undefined || url === null || (typeof url === 'string' && url.trim() === '')) {
      pruned.push({ index: i, source: source as S, reason: 'no-url' });
      continue;
    }
    if (typeof url !== 'string') typeError(`sources[${i}].${urlField}`, `must be a string, got ${describe(url)}`);
    indices.push(i);
    keys.push(canonical ? canonicalizeUrl(url) : url);
  }

  const scores = Float64Array.from(indices, (i) => all[i] as number);
  const survivor = native.scoredSurvivors(keys, scores);
  const unique: number[] = [];
  for (let k = 0; k < indices.length; k++) {
    const index = indices[k] as number;
    const keep = survivor[k] as number;
    if (keep === k) {
      unique.push(index);
    } else {
      pruned.push({ index, source: sources[index] as S, reason: 'duplicate', duplicateOf: indices[keep] as number, key: keys[k] as string });
    }
  }
  unique.sort((a, b) => (all[b] as number) - (all[a] as number) || a - b);
  pruned.sort((a, b) => a.index - b.index);
  const withoutUrl = pruned.filter((p) => p.reason === 'no-url').length;
  const kept = unique.map((i) => sources[i] as S);
  const stats = { input: sources.length, kept: kept.length, removed: pruned.length, withoutUrl, duplicates: pruned.length - withoutUrl };
  deprecatedAlias(stats, 'total', stats.input);
  deprecatedAlias(stats, 'unique', stats.kept);
  deprecatedAlias(stats, 'pruned', stats.removed);
  const result = { kept, decisions: pruned, stats };
  deprecatedAlias(result, 'unique', kept);
  return deprecatedAlias(result, 'pruned', pruned) as DedupeSourcesResult<S>;
}

/**
 * Splits findings texts into paragraphs and keeps the first occurrence of each (see the module
 * notes for the exact normalization). Paragraphs are trimmed; blank ones are dropped.
 *
 * @returns the kept paragraphs joined by a blank line, what was removed, and token counts.
 * @throws TypeError naming the path if `findings` is not an array of strings; RangeError if
 *   `minChars` is not a non-negative integer.
 * @example
 * dedupeFindings(['Rust is memory safe without a GC.\n\nA', 'rust is  memory safe without a gc.']).text
 * // -> 'Rust is memory safe without a GC.\n\nA'
 */
export function dedupeFindings(findings: readonly string[], options?: DedupeFindingsOptions): DedupeFindingsResult {
  expectArray(findings, 'findings');
  // An indexed loop, not forEach: a hole is `undefined` at its index and is reported as such.
  for (let i = 0; i < findings.length; i++) {
    const f: unknown = findings[i];
    if (typeof f !== 'string') typeError(`findings[${i}]`, `must be a string, got ${describe(f)}`);
  }
  expectOptions(options);
  const o = (options ?? {}) as Record<string, unknown>;
  expectKnownKeys(o, 'options', ['minChars', 'countTokens']);
  const minChars = optionalNumber(o['minChars'], 'options.minChars', 20, { min: 0, max: 2 ** 32 - 1, integer: true });
  const count = resolveTokenCounter(o['countTokens'], 'options.countTokens');

  const result = native.dedupeFindings(findings as string[], minChars);
  const n = result.first.length;
  const paragraphs = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    paragraphs[i] = (findings[result.text[i] as number] as string).slice(result.start[i], result.end[i]);
  }
  const kept: string[] = [];
  const duplicates: FindingDuplicate[] = [];
  for (let i = 0; i < n; i++) {
    const first = result.first[i] as number;
    if (first === i) {
      kept.push(paragraphs[i] as string);
    } else {
      const duplicateOfParagraph = paragraphs[first] as string;
      const duplicate = {
        finding: result.text[i] as number,
        paragraph: paragraphs[i] as string,
        duplicateOfFinding: result.text[first] as number,
        duplicateOfParagraph,
      };
      duplicates.push(deprecatedAlias(duplicate, 'duplicateOf', duplicateOfParagraph) as FindingDuplicate);
    }
  }
  const text = kept.join('\n\n');
  const tokens = count(text);
  const naiveTokens = duplicates.length === 0 ? tokens : count(paragraphs.join('\n\n'));
  const stats: DedupeFindingsStats = { paragraphs: n, kept: kept.length, removed: duplicates.length, tokens, naiveTokens, tokensSaved: naiveTokens - tokens };
  const out = { text, decisions: duplicates, stats };
  deprecatedAlias(out, 'duplicates', duplicates);
  for (const key of ['removed', 'tokensSaved', 'tokens', 'naiveTokens', 'paragraphs', 'kept'] as const) deprecatedAlias(out, key, stats[key]);
  return out as DedupeFindingsResult;
}

/**
 * The dedup key of one paragraph: `paragraph.toLowerCase().replace(/\s+/g, ' ').trim()`,
 * computed by the native core.
 *
 * @throws TypeError if `paragraph` is not a string.
 */
export function findingKey(paragraph: string): string {
  if (typeof paragraph !== 'string') typeError('paragraph', `must be a string, got ${describe(paragraph)}`);
  return native.paragraphKeys([paragraph])[0] as string;
}

/** A count read from a caller's result object: an integer, at least `min`. */
function count(value: unknown, path: string, min = 0): number {
  if (typeof value !== 'number') typeError(path, `must be a number, got ${describe(value)}`);
  if (!Number.isSafeInteger(value) || value < min) rangeError(path, `must be an integer${min === 0 ? ' >= 0' : ''}, got ${value}`);
  return value;
}

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}

/**
 * The report card of the research dedup stage: findings tokens before and after, and the source
 * and findings counts as labelled items.
 *
 * @throws TypeError if neither result is given, one is not an object, or a count it reads
 *   (`sources.stats.input`, `kept`, `removed`; `findings.stats.tokens`, `naiveTokens`, `removed`,
 *   `tokensSaved`) is not a number; RangeError if such a count is not an integer (or negative,
 *   except `tokensSaved`). Results in the shape of earlier versions (`sources.stats.total`,
 *   `unique`, `pruned`; the findings counts at the top level) are read too.
 */
export function researchStageReport(results: { sources?: DedupeSourcesResult; findings?: DedupeFindingsResult }): StageReport {
  expectObject(results, 'results');
  const { sources, findings } = results;
  if (sources === undefined && findings === undefined) typeError('results', 'must hold sources and/or findings');
  const items: StageReportItem[] = [];
  if (sources !== undefined) {
    expectObject(sources, 'results.sources');
    const stats: unknown = sources['stats'];
    expectObject(stats, 'results.sources.stats');
    const read = (name: string, old: string): number => {
      const key = stats[name] === undefined && stats[old] !== undefined ? old : name;
      return count(stats[key], `results.sources.stats.${key}`);
    };
    items.push(
      { label: 'Sources', value: read('input', 'total') },
      { label: 'Unique sources', value: read('kept', 'unique') },
      { label: 'Pruned sources', value: read('removed', 'pruned') },
    );
  }
  let tokens = 0;
  let naiveTokens = 0;
  if (findings !== undefined) {
    expectObject(findings, 'results.findings');
    // The counts are in `stats`; results of earlier versions hold them at the top level.
    const flat = findings['stats'] === undefined;
    const stats: unknown = flat ? findings : findings['stats'];
    const at = flat ? 'results.findings' : 'results.findings.stats';
    expectObject(stats, at);
    tokens = count(stats['tokens'], `${at}.tokens`);
    naiveTokens = count(stats['naiveTokens'], `${at}.naiveTokens`);
    items.push(
      { label: 'Duplicate paragraphs removed', value: count(stats['removed'], `${at}.removed`) },
      { label: 'Findings tokens saved', value: count(stats['tokensSaved'], `${at}.tokensSaved`, -Number.MAX_SAFE_INTEGER) },
    );
  }
  const savedPercent = naiveTokens > 0 ? round1(((naiveTokens - tokens) / naiveTokens) * 100) : 0;
  return { stage: 'deduplication', tokens, naiveTokens, savedPercent, items };
}

/**
 * Runs {@link dedupeSources} and {@link dedupeFindings} and builds the stage report.
 *
 * @throws the errors of the two stages.
 */
export function dedupeResearch<S extends Source>(
  input: { sources: readonly S[]; findings: readonly string[] },
  options?: DedupeSourcesOptions & DedupeFindingsOptions,
): { sources: DedupeSourcesResult<S>; findings: DedupeFindingsResult; report: StageReport } {
  expectObject(input, 'input');
  expectOptions(options);
  if (options !== undefined) {
    expectKnownKeys(options as Record<string, unknown>, 'options', ['credibilityField', 'urlField', 'canonicalizeUrls', 'minChars', 'countTokens']);
  }
  const { credibilityField, urlField, canonicalizeUrls, minChars, countTokens } = options ?? {};
  const sourceOptions: DedupeSourcesOptions = {};
  if (credibilityField !== undefined) sourceOptions.credibilityField = credibilityField;
  if (urlField !== undefined) sourceOptions.urlField = urlField;
  if (canonicalizeUrls !== undefined) sourceOptions.canonicalizeUrls = canonicalizeUrls;
  const findingOptions: DedupeFindingsOptions = {};
  if (minChars !== undefined) findingOptions.minChars = minChars;
  if (countTokens !== undefined) findingOptions.countTokens = countTokens;
  const sources = dedupeSources(input.sources, sourceOptions);
  const findings = dedupeFindings(input.findings, findingOptions);
  return { sources, findings, report: researchStageReport({ sources, findings }) };
}
