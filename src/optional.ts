/**
 * The optional peer packages: SQLite (better-sqlite3), Redis (ioredis), ChromaDB (chromadb),
 * Fastify (fastify) with prom-client, ONNX Runtime (onnxruntime-node) and Hugging Face
 * tokenizers.js (@huggingface/tokenizers). `ctxdedup` does not depend on them; the
 * store, server or embedder that needs one loads it on first use, and a missing one is reported
 * as one clear error saying what to install. Importing `ctxdedup` loads none of them.
 * @internal
 * @module
 */
import { createRequire } from 'node:module';

/**
 * The optional peers and the version ranges `ctxdedup` is tested with (the `peerDependencies` of
 * package.json; a test keeps the two equal).
 * @internal
 */
export const OPTIONAL_PEERS = {
  '@huggingface/tokenizers': '^0.2.0',
  'better-sqlite3': '^12.11.1',
  chromadb: '^3.5.0',
  fastify: '^5.12.8',
  ioredis: '^6.0.0',
  'onnxruntime-node': '>=1.20.0',
  'prom-client': '^15.1.3',
} as const;

/** What a peer's install needs to know, added to the missing-peer error. */
const INSTALL_NOTES: Partial<Record<OptionalPeer, string>> = {
  'onnxruntime-node': '; with `onnxruntime-node-install=skip` in .npmrc it skips downloading its CUDA provider at install time',
};

/** The name of an optional peer package. @internal */
export type OptionalPeer = keyof typeof OPTIONAL_PEERS;

/** `code` of the error {@link missingPeer} returns. @internal */
export const MISSING_PEER = 'CTXDEDUP_MISSING_PEER';

const require = createRequire(import.meta.url);

/**
 * Whether `error` says that `name` itself cannot be found (not one of its own dependencies, and
 * not a module that is there but fails to load: those errors are passed on as they are).
 */
function isNotFound(error: unknown, name: string): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false;
  // ESM: "Cannot find package 'x' imported from …"; CommonJS: "Cannot find module 'x'".
  return typeof message === 'string' && (message.includes(`package '${name}'`) || message.includes(`module '${name}'`));
}

/**
 * The error for a peer that is not installed (`ctxdedup: <feature> needs the optional package
 * <name>, which is not installed: npm install <name> (version <range>)`), with code
 * {@link MISSING_PEER} and the loader's error as `cause`.
 * @internal
 */
export function missingPeer(name: OptionalPeer, feature: string, cause: unknown): Error {
  const error = new Error(
    `ctxdedup: ${feature} needs the optional package ${name}, which is not installed: \`npm install ${name}\` (version ${OPTIONAL_PEERS[name]})${INSTALL_NOTES[name] ?? ''}`,
    { cause },
  );
  return Object.assign(error, { code: MISSING_PEER });
}

/**
 * Loads a CommonJS peer synchronously (for constructors that must stay synchronous).
 * @throws Error ({@link missingPeer}) if it is not installed; its own load error otherwise.
 * @internal
 */
export function requirePeer<T>(name: OptionalPeer, feature: string): T {
  try {
    return require(name) as T;
  } catch (error) {
    if (isNotFound(error, name)) throw missingPeer(name, feature, error);
    throw error;
  }
}

/**
 * Runs `load` (a dynamic `import()` of the peer, or of a module that imports it statically).
 * @throws Error ({@link missingPeer}) if the peer is not installed; the load error otherwise.
 * @internal
 */
export async function importPeer<T>(name: OptionalPeer, feature: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if (isNotFound(error, name)) throw missingPeer(name, feature, error);
    throw error;
  }
}
