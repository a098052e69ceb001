/**
 * `ctxdedup memories dedupe`: batch deduplication of a memory store, with a report of clusters,
 * actions and counts.
 * @module
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { Option } from 'commander';
// The memory modules (and their TOML parser) load when the command runs, not with every CLI run.
import type { MemoryConfig } from '../memory/config.js';
import type { BatchReport, MemoryDeduplicator, MergeFunction } from '../memory/deduplicator.js';
import type { CliIO } from './dedupe.js';
import { DataError, UsageError } from './errors.js';
import { print } from './output.js';
import { fraction } from './arguments.js';

/** A merge function that runs `command` in a shell with the prompt on stdin; stdout is the memory. */
export function commandMerge(command: string): MergeFunction {
  return (_older, _newer, { prompt }) =>
    new Promise((resolve, reject) => {
      const child = spawn(command, { shell: true, stdio: ['pipe', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
      child.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
      child.on('error', reject);
      child.on('close', (code) => {
        if (code === 0) resolve(out.trim());
        else reject(new Error(`merge command exited with ${code}${err.trim() === '' ? '' : `: ${err.trim().split('\n')[0]}`}`));
      });
      child.stdin.on('error', () => {}); // a command that ignores stdin may close it early
      child.stdin.end(prompt);
    });
}

function preview(text: string, max = 70): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

/** The report as text for a terminal. */
export function renderMemoryReport(report: BatchReport): string {
  const lines = [
    `ctxdedup memories dedupe${report.dryRun ? ' (dry run: nothing changed)' : ''}`,
    `  thresholds: lower ${report.lowerThreshold}, upper ${report.upperThreshold}; linkage ${report.linkage}`,
  ];
  report.clusters.forEach((c, i) => {
    const range = `${c.minSimilarity.toFixed(4)}–${c.maxSimilarity.toFixed(4)}`;
    const outcome = c.failure ? `${c.action} failed (${c.failure}), kept newest` : c.action;
    lines.push(`  cluster ${i + 1}: ${c.members.length} memories, similarity ${range}, ${outcome} → ${c.resultId}`);
    for (const m of c.members) {
      const when = m.timestamp === undefined ? '' : ` ${new Date(m.timestamp).toISOString()}`;
      const mark = m.id === c.resultId ? '*' : c.removedIds.includes(m.id) ? '-' : ' ';
      lines.push(`    ${mark} ${m.id}${when}: ${preview(m.content)}`);
    }
  });
  const verb = report.dryRun ? 'would remove' : 'removed';
  lines.push(`  ${report.memories} memories, ${report.clusters.length} clusters, ${verb} ${report.removed}, ${report.remaining} remain`);
  return `${lines.join('\n')}\n`;
}

interface MemoriesDedupeOptions {
  store?: string;
  config?: string;
  collection?: string;
  dryRun: boolean;
  lower?: number;
  upper?: number;
  linkage?: 'single' | 'complete';
  mergeCommand?: string;
  json: boolean;
}

async function loadConfig(path: string | undefined): Promise<MemoryConfig> {
  if (path === undefined) return {};
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read --config ${path}: ${(error as Error).message}`);
  }
  const { parseMemoryConfig } = await import('../memory/config.js');
  try {
    return parseMemoryConfig(text, path);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

async function memoriesDedupe(opts: MemoriesDedupeOptions, io: CliIO): Promise<void> {
  const config = await loadConfig(opts.config);
  const spec = opts.store ?? config.store;
  if (spec === undefined) throw new UsageError('memories dedupe needs --store (or store in the --config file)');
  const collection = opts.collection ?? config.collection;
  const [{ openMemoryStore }, { MemoryDeduplicator }, { hashedEmbedding }] = await Promise.all([
    import('../memory/config.js'),
    import('../memory/deduplicator.js'),
    import('../memory/embedding.js'),
  ]);
  let store;
  try {
    store = await openMemoryStore(spec, collection === undefined ? {} : { collection });
  } catch (error) {
    if (error instanceof TypeError) throw new UsageError(error.message);
    throw new DataError(spec, undefined, (error as Error).message);
  }
  try {
    const mergeCommand = opts.mergeCommand ?? config.mergeCommand;
    const upperThreshold = opts.upper ?? config.upperThreshold ?? 0.95;
    const lowerThreshold = opts.lower ?? config.lowerThreshold ?? 0.9;
    let dedup: MemoryDeduplicator;
    try {
      dedup = new MemoryDeduplicator({
        store,
        // Only a merged text is embedded here (stored memories keep their vectors), so the
        // built-in embedder must produce vectors of the store's dimension.
        embed: hashedEmbedding(config.embedding?.dim === undefined ? {} : { dim: config.embedding.dim }),
        upperThreshold,
        lowerThreshold,
        ...(config.enabled === undefined ? {} : { enabled: config.enabled }),
        ...(mergeCommand === undefined ? {} : { merge: commandMerge(mergeCommand) }),
        logger: { info: () => {}, warn: (e) => io.stderr.write(`ctxdedup: warning: ${JSON.stringify(e)}\n`) },
      });
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
    const report = await dedup.dedupeAll({ dryRun: opts.dryRun, linkage: opts.linkage ?? config.linkage ?? 'single' });
    await print(io.stdout, opts.json ? `${JSON.stringify(report, null, 2)}\n` : renderMemoryReport(report));
  } catch (error) {
    if (error instanceof RangeError) throw new DataError(spec, undefined, error.message);
    throw error;
  } finally {
    await store.close();
  }
}

/** Adds `memories dedupe` to the program. */
export function addMemoriesCommand(program: Command, io: CliIO): void {
  const memories = program.command('memories').description('deduplicate an agent memory store');
  memories
    .command('dedupe')
    .description('cluster similar memories and keep the newest or merge each cluster')
    .option('--store <spec>', 'memory store: sqlite:<path>, chroma:<url> or memory')
    .option('--config <file>', 'TOML file with a [memory] table (flags override it)')
    .option('--collection <name>', 'ChromaDB collection (with a chroma: store)')
    .option('--dry-run', 'report what would happen, change nothing', false)
    .option('--lower <similarity>', 'cluster memories at or above this cosine similarity (default 0.9)', fraction)
    .option('--upper <similarity>', 'at or above this everywhere, keep the newest; below, merge (default 0.95)', fraction)
    .addOption(new Option('--linkage <kind>', 'single: chains join clusters; complete: every pair similar').choices(['single', 'complete']))
    .option('--merge-command <command>', 'shell command that gets the merge prompt on stdin and prints the merged memory')
    .option('--json', 'print the report as JSON', false)
    .action(async (opts: MemoriesDedupeOptions) => memoriesDedupe(opts, io));
}
