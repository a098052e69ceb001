/**
 * A lean install and a lean import (issue 16, items 1 and 2).
 *
 * - Importing `ctxdedup` (the built dist, by its package name) loads only the package's own
 *   dependencies: none of the optional peers (better-sqlite3, fastify, chromadb, ioredis,
 *   onnxruntime-node). The subpaths load them only when a store, server or embedder needs one.
 *   What a child process loads is recorded by an ESM resolve hook (imports) and `require.cache`
 *   (CommonJS requires), and a control run shows that both ways of loading a peer are seen.
 * - In an install layout without the peers (the built package with only its dependencies beside
 *   it), every feature that needs one fails with one error saying what to install, and the rest
 *   works.
 * - With no native addon for this platform, the loader names the platform and the package.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../support/build.js';
import { OPTIONAL_PEERS } from '../../src/optional.js';
import { tempDir } from '../support/cli-helpers.js';

const ROOT = join(import.meta.dirname, '..', '..');
const MANIFEST = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  optionalDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
  exports: Record<string, unknown>;
};
/** Every peer: those ctxdedup loads on use (OPTIONAL_PEERS) and those only its types refer to. */
const PEERS = Object.keys(MANIFEST.peerDependencies);
const SUBPATHS = Object.keys(MANIFEST.exports)
  .filter((key) => key !== '.' && key !== './package.json')
  .map((key) => `ctxdedup${key.slice(1)}`);

let tmp: { dir: string; cleanup: () => void };

beforeAll(() => {
  // The tests import the compiled package.
  ensureBuilt(join(ROOT, 'dist', 'index.js'));
  tmp = tempDir('ctxdedup-lean-');
}, 120_000);
afterAll(() => tmp?.cleanup());

/** The package a resolved module belongs to (`@scope/name` or `name`), if it is in a node_modules. */
function packageOf(path: string): string | undefined {
  const parts = path.split(/[\\/]/);
  const at = parts.lastIndexOf('node_modules');
  if (at < 0 || at + 1 >= parts.length) return undefined;
  const first = parts[at + 1]!;
  return first.startsWith('@') ? `${first}/${parts[at + 2]}` : first;
}

let harness = 0;

/**
 * Runs `body` (an ES module body; `ctxdedup` and its subpaths resolve to the package at `cwd`)
 * in a child process and returns the packages it loaded, and what it printed.
 */
function packagesLoaded(cwd: string, body: string): { packages: Set<string>; stdout: string } {
  const id = harness++;
  const log = join(tmp.dir, `resolved-${id}.log`);
  const hooks = join(tmp.dir, `hooks-${id}.mjs`);
  const cache = join(tmp.dir, `require-cache-${id}.json`);
  writeFileSync(log, '');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';
let log;
export function initialize(data) { log = data.log; }
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(log, result.url + '\\n');
  return result;
}
`,
  );
  const register = `import { register } from 'node:module'; register(${JSON.stringify(pathToFileURL(hooks).href)}, { data: { log: ${JSON.stringify(log)} } });`;
  const script = `import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
${body}
writeFileSync(${JSON.stringify(cache)}, JSON.stringify(Object.keys(createRequire(import.meta.url).cache)));
`;
  const r = spawnSync(process.execPath, ['--import', `data:text/javascript,${encodeURIComponent(register)}`, '--input-type=module', '-e', script], {
    cwd,
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(r.status, r.stderr).toBe(0);
  const paths = [
    ...readFileSync(log, 'utf8')
      .split('\n')
      .filter((url) => url.startsWith('file:'))
      .map((url) => decodeURIComponent(new URL(url).pathname)),
    ...(JSON.parse(readFileSync(cache, 'utf8')) as string[]),
  ];
  const packages = new Set(paths.map(packageOf).filter((name): name is string => name !== undefined));
  return { packages, stdout: r.stdout };
}

describe('package manifest', () => {
  it('declares the optional peers as optional peer dependencies (and dev dependencies), not dependencies', () => {
    for (const [peer, range] of Object.entries(OPTIONAL_PEERS)) expect(MANIFEST.peerDependencies[peer], peer).toBe(range);
    for (const peer of PEERS) {
      expect(MANIFEST.peerDependenciesMeta[peer]?.optional, peer).toBe(true);
      expect(Object.keys(MANIFEST.dependencies)).not.toContain(peer);
      expect(Object.keys(MANIFEST.devDependencies), peer).toContain(peer);
    }
  });

  it('declares every per-platform package in npm/ as an optional dependency of this exact version', () => {
    const platforms = readdirSync(join(ROOT, 'npm'), { withFileTypes: true }).filter((e) => e.isDirectory());
    expect(platforms.length).toBeGreaterThan(0);
    const expected: Record<string, string> = {};
    for (const platform of platforms) {
      const pkg = JSON.parse(readFileSync(join(ROOT, 'npm', platform.name, 'package.json'), 'utf8')) as {
        name: string;
        version: string;
        main: string;
        files: string[];
      };
      expect(pkg.name).toBe(`ctxdedup-${platform.name}`);
      expect(pkg.version).toBe(MANIFEST.version);
      expect(pkg.main).toBe(`ctxdedup.${platform.name}.node`);
      expect(pkg.files).toEqual([pkg.main]);
      expected[pkg.name] = MANIFEST.version;
    }
    expect(MANIFEST.optionalDependencies).toEqual(expected);
  });
});

describe("import 'ctxdedup'", () => {
  it('loads only the dependencies of the package: none of the optional peers', () => {
    const { packages, stdout } = packagesLoaded(
      ROOT,
      "const m = await import('ctxdedup'); console.log(typeof m.dedupeMessages, 'IngestIndex' in m, 'MemoryDeduplicator' in m);",
    );
    expect(stdout.trim()).toBe('function false false');
    for (const peer of PEERS) expect(packages, peer).not.toContain(peer);
    const allowed = new Set([...Object.keys(MANIFEST.dependencies), ...Object.keys(MANIFEST.optionalDependencies)]);
    expect([...packages].filter((name) => !allowed.has(name))).toEqual([]);
  });

  it('has the ingest, memory and server subpaths', () => {
    expect(SUBPATHS).toEqual(expect.arrayContaining(['ctxdedup/ingest', 'ctxdedup/memory', 'ctxdedup/server']));
  });

  it.each(SUBPATHS)('%s loads no optional peer until one is used', (subpath) => {
    const { packages } = packagesLoaded(ROOT, `await import(${JSON.stringify(subpath)});`);
    for (const peer of PEERS) expect(packages, peer).not.toContain(peer);
  });

  it('the harness sees a peer loaded by import and by require (control)', () => {
    const { packages } = packagesLoaded(ROOT, "await import('ctxdedup'); await import('fastify'); createRequire(import.meta.url)('better-sqlite3');");
    expect(packages).toContain('fastify');
    expect(packages).toContain('better-sqlite3');
  });

  it('a store that needs a peer loads it on first use', () => {
    const { packages, stdout } = packagesLoaded(
      ROOT,
      "const { SqliteMemoryStore } = await import('ctxdedup/memory'); const s = new SqliteMemoryStore(':memory:'); console.log(s.kind); await s.close();",
    );
    expect(stdout.trim()).toBe('sqlite');
    expect(packages).toContain('better-sqlite3');
  });
});

/** The built package, its dependencies and this platform's addon, without the optional peers but `peers`. */
function installWithoutPeers(name = 'no-peers', peers: string[] = []): string {
  const pkg = join(tmp.dir, name, 'node_modules', 'ctxdedup');
  mkdirSync(pkg, { recursive: true });
  // Nothing above the layout may hold packages, or the peers could be found there.
  for (let dir = dirname(dirname(dirname(pkg))); ; dir = dirname(dir)) {
    expect(existsSync(join(dir, 'node_modules')), `${dir}${sep}node_modules must not exist`).toBe(false);
    if (dirname(dir) === dir) break;
  }
  cpSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
  cpSync(join(ROOT, 'dist'), join(pkg, 'dist'), { recursive: true });
  const modules = join(tmp.dir, name, 'node_modules');
  for (const dep of [...Object.keys(MANIFEST.dependencies), ...peers]) symlinkSync(join(ROOT, 'node_modules', dep), join(modules, dep), 'dir');
  for (const name of readdirSync(join(ROOT, 'npm'))) {
    const addon = join(ROOT, 'npm', name, `ctxdedup.${name}.node`);
    if (existsSync(addon)) cpSync(join(ROOT, 'npm', name), join(modules, `ctxdedup-${name}`), { recursive: true });
  }
  writeFileSync(join(tmp.dir, name, 'package.json'), '{ "name": "app", "private": true, "type": "module" }\n');
  return join(tmp.dir, name);
}

describe('without the optional peers installed', () => {
  let project: string;
  beforeAll(() => {
    project = installWithoutPeers();
  });

  function missing(peer: string): RegExp {
    return new RegExp(`needs the optional package ${peer}, which is not installed: \`npm install ${peer}\``);
  }

  it('the root entry and the in-process stores work', () => {
    const script = `
const { dedupeMessages } = await import('ctxdedup');
const result = dedupeMessages([{ id: 'm0', role: 'user', content: 'x'.repeat(300) }, { id: 'm1', role: 'user', content: 'x'.repeat(300) }], { recencyWindow: 0 });
const { MemoryDeduplicator, InMemoryStore } = await import('ctxdedup/memory');
const dedup = new MemoryDeduplicator({ store: new InMemoryStore() });
await dedup.checkAndMerge({ id: 'a', content: 'the sky is blue' });
const second = await dedup.checkAndMerge({ id: 'b', content: 'the sky is blue' });
const { IngestIndex } = await import('ctxdedup/ingest');
const index = await IngestIndex.open({ store: 'memory' });
const ingested = await index.ingest('ns', [{ content: 'a' }, { content: 'a' }]);
await index.close();
console.log(JSON.stringify([result.stats.exactDuplicates, second.decision, ingested.map((r) => r.status)]));
`;
    const { packages, stdout } = packagesLoaded(project, script);
    expect(JSON.parse(stdout)).toEqual([1, 'replace', ['new', 'duplicate']]);
    for (const peer of PEERS) expect(packages, peer).not.toContain(peer);
  });

  it.each([
    ['SqliteMemoryStore', 'better-sqlite3', "const { SqliteMemoryStore } = await import('ctxdedup/memory'); new SqliteMemoryStore('m.db');"],
    ["openMemoryStore('sqlite:…')", 'better-sqlite3', "const { openMemoryStore } = await import('ctxdedup/memory'); await openMemoryStore('sqlite:m.db');"],
    [
      'ChromaMemoryStore.connect',
      'chromadb',
      "const { ChromaMemoryStore } = await import('ctxdedup/memory'); await ChromaMemoryStore.connect({ url: 'http://127.0.0.1:9' });",
    ],
    ['onnxEmbedding', 'onnxruntime-node', "const { onnxEmbedding } = await import('ctxdedup/memory'); await onnxEmbedding({ modelDir: 'model' });"],
    [
      "IngestIndex.open({ store: 'sqlite:…' })",
      'better-sqlite3',
      "const { IngestIndex } = await import('ctxdedup/ingest'); await IngestIndex.open({ store: 'sqlite:i.sqlite' });",
    ],
    [
      "IngestIndex.open({ store: 'redis://…' })",
      'ioredis',
      "const { IngestIndex } = await import('ctxdedup/ingest'); await IngestIndex.open({ store: 'redis://127.0.0.1:9' });",
    ],
    ['startServer', 'fastify', "const { startServer } = await import('ctxdedup/server'); await startServer({ store: 'memory', port: 0 });"],
  ])('%s says to install %s', (_feature, peer, body) => {
    const script = `try { ${body} console.log('no error'); } catch (error) { console.log(JSON.stringify({ message: error.message, code: error.code })); }`;
    const { stdout } = packagesLoaded(project, script);
    const { message, code } = JSON.parse(stdout) as { message: string; code: string };
    expect(message).toMatch(missing(peer));
    expect(code).toBe('CTXDEDUP_MISSING_PEER');
    // Nothing was created on the way to the error.
    expect(readdirSync(project).sort()).toEqual(['node_modules', 'package.json']);
  });

  // Features that need two peers name the missing one when the other is installed.
  it.each([
    [
      'onnxEmbedding',
      '@huggingface/tokenizers',
      'onnxruntime-node',
      "const { onnxEmbedding } = await import('ctxdedup/memory'); await onnxEmbedding({ modelDir: 'model' });",
    ],
    ['startServer', 'prom-client', 'fastify', "const { startServer } = await import('ctxdedup/server'); await startServer({ store: 'memory', port: 0 });"],
  ])('%s says to install %s when %s is there', (_feature, peer, other, body) => {
    const dir = installWithoutPeers(`only-${other}`, [other]);
    const script = `try { ${body} console.log('no error'); } catch (error) { console.log(JSON.stringify({ message: error.message, code: error.code })); }`;
    const { stdout, packages } = packagesLoaded(dir, script);
    const { message, code } = JSON.parse(stdout) as { message: string; code: string };
    expect(message).toMatch(missing(peer));
    expect(code).toBe('CTXDEDUP_MISSING_PEER');
    expect(packages).toContain(other);
    expect(readdirSync(dir).sort()).toEqual(['node_modules', 'package.json']);
  });

  it('the CLI dedupes without them, and serve / memories say what to install', () => {
    const bin = join(project, 'node_modules', 'ctxdedup', 'dist', 'cli', 'main.js');
    const run = (args: string[]) => spawnSync(process.execPath, [bin, ...args], { cwd: project, encoding: 'utf8', timeout: 60_000 });
    const dedupe = run(['dedupe', join(ROOT, 'examples', 'sample-transcript.json'), '--dry-run']);
    expect(dedupe.status, dedupe.stderr).toBe(0);
    expect(dedupe.stdout).toMatch(/tokens saved/);
    const serve = run(['serve', '--store', 'memory', '--port', '0']);
    expect(serve.status).toBe(1);
    expect(serve.stderr).toMatch(missing('fastify'));
    const memories = run(['memories', 'dedupe', '--store', 'sqlite:m.db', '--dry-run']);
    expect(memories.status).toBe(1);
    expect(memories.stderr).toMatch(missing('better-sqlite3'));
    for (const r of [serve, memories]) expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('native addon loader', () => {
  /** Imports dist/native.js of a package made of it (and what it imports) and `manifest` alone, and returns the error. */
  function loadError(name: string, manifest: object): string {
    const pkg = join(tmp.dir, name, 'node_modules', 'ctxdedup');
    mkdirSync(join(pkg, 'dist'), { recursive: true });
    for (const file of ['native.js', 'package-root.js']) cpSync(join(ROOT, 'dist', file), join(pkg, 'dist', file));
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'ctxdedup', type: 'module', ...manifest }));
    const r = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', `await import(${JSON.stringify(pathToFileURL(join(pkg, 'dist', 'native.js')).href)})`],
      {
        cwd: join(tmp.dir, name),
        encoding: 'utf8',
        env: { ...process.env, CTXDEDUP_NATIVE_PATH: '' },
        timeout: 60_000,
      },
    );
    expect(r.status).not.toBe(0);
    const line = r.stderr.split('\n').find((l) => l.startsWith('Error: '));
    expect(line, r.stderr).toBeDefined();
    return r.stderr.slice(r.stderr.indexOf('Error: ') + 'Error: '.length).split('\n    at ')[0]!;
  }

  const id = readdirSync(join(ROOT, 'npm')).find((name) => existsSync(join(ROOT, 'npm', name, `ctxdedup.${name}.node`)));

  it('names the platform and the package to install when its prebuilt package is missing', () => {
    expect(id).toBeDefined();
    const message = loadError('no-addon', { version: MANIFEST.version, optionalDependencies: MANIFEST.optionalDependencies });
    expect(message).toContain(`ctxdedup: no native addon for ${id} (Node.js ${process.version})`);
    expect(message).toContain(`install the package ctxdedup-${id}@${MANIFEST.version} (\`npm install ctxdedup-${id}@${MANIFEST.version}\`)`);
    expect(message.split('\n')).toHaveLength(1);
  });

  it('says that no prebuilt package exists for a platform that has none', () => {
    const others = Object.fromEntries(Object.entries(MANIFEST.optionalDependencies).filter(([name]) => name !== `ctxdedup-${id}`));
    const message = loadError('unsupported', { version: MANIFEST.version, optionalDependencies: others });
    expect(message).toContain(`ctxdedup: no native addon for ${id} (Node.js ${process.version}): no prebuilt package exists for ${id} (prebuilt: `);
    expect(message).toContain('build it from source');
  });
});
