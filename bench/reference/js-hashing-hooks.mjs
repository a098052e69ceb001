// Module resolve hook of bench/reference/js-hashing.mjs: src/ingest/hash.ts -> bench/reference/hashing.ts.
const BASELINE = new URL('./hashing.ts', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  // The baseline itself re-exports a constant of the real module.
  if (context.parentURL === BASELINE) return resolved;
  if (/\/src\/ingest\/hash\.(ts|js)$/.test(resolved.url)) return { ...resolved, url: BASELINE };
  return resolved;
}
