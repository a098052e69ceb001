/**
 * The product (everything under src/) imports only what an install of `ctxdedup` provides: its
 * dependencies, optional peers and Node built-ins. Dev tools (tsx, vitest, benchmark baselines)
 * stay in test/ and bench/, which bring their own loaders.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** Package names imported by a source text (static, dynamic and re-exports; `import type` too). */
function imported(text: string): string[] {
  const names: string[] = [];
  for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"]([^'"]+)['"]/g)) {
    const spec = m[1] as string;
    if (spec.startsWith('.') || spec.startsWith('node:') || spec.startsWith('/')) continue;
    const parts = spec.split('/');
    names.push(spec.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] as string));
  }
  return names;
}

describe('the product', () => {
  it('imports no devDependency from src/', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, Record<string, string> | undefined>;
    const shipped = new Set([
      ...Object.keys(pkg['dependencies'] ?? {}),
      ...Object.keys(pkg['peerDependencies'] ?? {}),
      ...Object.keys(pkg['optionalDependencies'] ?? {}),
    ]);
    const devOnly = Object.keys(pkg['devDependencies'] ?? {}).filter((name) => !shipped.has(name));
    const found: string[] = [];
    for (const e of readdirSync(join(ROOT, 'src'), { withFileTypes: true, recursive: true })) {
      if (!e.isFile() || !/\.(ts|mts|js|mjs|cjs)$/.test(e.name)) continue;
      const path = join(e.parentPath, e.name);
      for (const name of imported(readFileSync(path, 'utf8'))) if (devOnly.includes(name)) found.push(`${path.slice(ROOT.length + 1)} imports ${name}`);
    }
    expect(found).toEqual([]);
  });
});
