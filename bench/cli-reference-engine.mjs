// The pure-JS reference dedup (bench/reference/cce.ts) as a `ctxdedup dedupe` engine, for
// bench/cli.bench.ts. Plain JavaScript, so the built CLI's worker threads can load it (the
// `engineModule` hook): it registers tsx in its thread only when TypeScript is not loadable yet.
//
// Same rules as the native stage for this pipeline: CCE's exact and fuzzy analysis, keep the
// latest copy, `preserve`, `threshold`; the tags have the stage's wording.

async function loadReference() {
  try {
    return await import('./reference/cce.ts');
  } catch (error) {
    if (error?.code !== 'ERR_UNKNOWN_FILE_EXTENSION') throw error;
    const { register } = await import('tsx/esm/api');
    register();
    // A new URL: the loader remembers the failed one.
    return import('./reference/cce.ts?tsx');
  }
}

const ref = await loadReference();

/**
 * @param {import('../src/stages/messages.js').Message[]} messages
 * @param {import('../src/stages/messages.js').DedupeMessagesOptions} options
 * @returns {Promise<import('../src/cli/dedupe-session.js').SessionDecisions>}
 */
export async function engine(messages, options) {
  const preserve = new Set(options.preserve ?? ['system']);
  const start = messages.length;
  const exact = ref.refAnalyzeDuplicates(messages, start, preserve);
  const fuzzy = options.near ? ref.refAnalyzeFuzzyDuplicates(messages, start, preserve, exact, options.threshold ?? 0.85) : new Map();
  const rewritten = [];
  for (const [kind, annotations] of [
    ['exact', exact],
    ['near', fuzzy],
  ]) {
    for (const [index, a] of annotations) {
      const keepId = messages[a.duplicateOfIndex].id;
      const chars = a.contentLength;
      const tag =
        kind === 'exact'
          ? `[ctxdedup: duplicate of ${keepId} — ${chars} chars]`
          : `[ctxdedup: near-duplicate of ${keepId} — ${chars} chars, ~${Math.round((a.similarity ?? 1) * 100)}% match]`;
      rewritten.push({ index, content: tag, charsSaved: messages[index].content.length - tag.length });
    }
  }
  rewritten.sort((x, y) => x.index - y.index);
  const targets = [...new Set([...exact.values(), ...fuzzy.values()].map((a) => a.duplicateOfIndex))].sort((x, y) => x - y);
  return { rewritten, targets, stats: { exactDuplicates: exact.size, nearDuplicates: fuzzy.size, keptInWindow: 0, blockReferences: 0, blockCharsSaved: 0 } };
}
