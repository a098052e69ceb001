/**
 * `ctxdedup doctor`: one clear answer on whether this install works. Prints the platform, which
 * native binary was loaded and from where, the versions that matter for compatibility (package,
 * addon, normalizations, ledger format, vectors), and runs the fast subset of the conformance
 * vectors. The native addon is loaded here, inside a try, so a broken install is reported rather
 * than crashing: keep every import of a module that loads it dynamic.
 * @module
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { packageRoot, packageVersion } from '../package-root.js';
import type { CliIO } from './dedupe.js';
import { EXIT } from './errors.js';

/** What `ctxdedup doctor --json` prints. */
export interface DoctorReport {
  ok: boolean;
  package: { name: 'ctxdedup'; version: string; root: string };
  node: { version: string; napi: string | undefined; modules: string };
  platform: { os: NodeJS.Platform; arch: string; libc: string | undefined };
  addon:
    | {
        loaded: true;
        file: string;
        via: string;
        platform: string | undefined;
        /** Version of the platform package holding the binary, when it has a package.json. */
        version: string | undefined;
        /** First 12 hex digits of the binary's SHA-256. */
        sha256: string;
        /** Candidates that failed to load before it. */
        failures: string[];
      }
    | { loaded: false; error: string };
  versions?: {
    findingsNormalization: number;
    ledgerFormat: string;
    ledgerVersion: number;
    conformanceFormat: string;
    conformanceVersion: number;
  };
  /** The default token encoding, loaded before the self-check. */
  tokenizer?: { encoding: string; loaded: true; milliseconds: number } | { encoding: string; loaded: false; error: string };
  selfCheck?: { passed: number; failed: number; skipped: number; milliseconds: number; failures: string[] };
  problems: string[];
}

function libc(): string | undefined {
  if (process.platform !== 'linux') return undefined;
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return header?.glibcVersionRuntime !== undefined ? `glibc ${header.glibcVersionRuntime}` : 'musl (no glibc found)';
}

function addonVersion(file: string): string | undefined {
  const manifest = join(dirname(file), 'package.json');
  if (!existsSync(manifest)) return undefined;
  try {
    return (JSON.parse(readFileSync(manifest, 'utf8')) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

/** Gathers the doctor report (loads the addon and runs the smoke vectors). */
export async function diagnose(): Promise<DoctorReport> {
  const problems: string[] = [];
  const root = packageRoot();
  const version = packageVersion();
  const report: DoctorReport = {
    ok: false,
    package: { name: 'ctxdedup', version, root },
    node: { version: process.version, napi: process.versions.napi, modules: process.versions.modules },
    platform: { os: process.platform, arch: process.arch, libc: libc() },
    addon: { loaded: false, error: '' },
    problems,
  };
  let findingsNormalization: number;
  try {
    const { native, nativeOrigin } = await import('../native.js');
    findingsNormalization = native.findingsNormalizationVersion();
    const addon = addonVersion(nativeOrigin.file);
    report.addon = {
      loaded: true,
      file: nativeOrigin.file,
      via: nativeOrigin.via,
      platform: nativeOrigin.platform,
      version: addon,
      sha256: createHash('sha256').update(readFileSync(nativeOrigin.file)).digest('hex').slice(0, 12),
      failures: nativeOrigin.failures,
    };
    if (addon !== undefined && addon !== version) problems.push(`the native addon is version ${addon}, the package ${version}: reinstall ctxdedup`);
  } catch (error) {
    report.addon = { loaded: false, error: error instanceof Error ? error.message : String(error) };
    problems.push(
      `the native addon could not be loaded: reinstall ctxdedup so that npm installs its optional dependency ctxdedup-<platform> ` +
        `(installs with --omit=optional or --no-optional skip it), or build it from source with \`npm run build:native\``,
    );
    return report;
  }
  const { LEDGER_FORMAT, LEDGER_VERSION } = await import('../stages/resources.js');
  const { CONFORMANCE_FORMAT, CONFORMANCE_VERSION, runConformance } = await import('../conformance/index.js');
  report.versions = {
    findingsNormalization,
    ledgerFormat: LEDGER_FORMAT,
    ledgerVersion: LEDGER_VERSION,
    conformanceFormat: CONFORMANCE_FORMAT,
    conformanceVersion: CONFORMANCE_VERSION,
  };
  const impl = await import('../index.js');
  // Load the default tokenizer first (the resource stage counts tokens): it is a one-time cost of
  // the process, reported on its own line, not part of the vectors' time.
  const tokenStart = performance.now();
  try {
    impl.countTokens('ctxdedup doctor');
    report.tokenizer = { encoding: impl.DEFAULT_ENCODING, loaded: true, milliseconds: Math.round(performance.now() - tokenStart) };
  } catch (error) {
    report.tokenizer = { encoding: impl.DEFAULT_ENCODING, loaded: false, error: error instanceof Error ? error.message : String(error) };
    problems.push(`the ${impl.DEFAULT_ENCODING} token counter could not be loaded`);
  }
  const start = performance.now();
  const check = await runConformance({ smoke: true, impl: impl as unknown as Record<string, unknown> });
  const milliseconds = Math.round(performance.now() - start);
  const failures = check.vectors.filter((v) => v.status === 'fail').map((v) => `${v.suite}/${v.id}: ${(v.diff ?? '').split('\n')[0]}`);
  report.selfCheck = { ...check.totals, milliseconds, failures };
  if (check.totals.failed > 0) problems.push(`${check.totals.failed} conformance vector(s) failed: this build does not behave as specified`);
  report.ok = problems.length === 0;
  return report;
}

/** The report as text. */
export function renderDoctor(r: DoctorReport): string {
  const lines = ['ctxdedup doctor', `  package    ctxdedup ${r.package.version} (${r.package.root})`];
  lines.push(`  node       ${r.node.version}, N-API ${r.node.napi ?? '?'}, ABI ${r.node.modules}`);
  lines.push(`  platform   ${r.platform.os} ${r.platform.arch}${r.platform.libc === undefined ? '' : `, ${r.platform.libc}`}`);
  if (r.addon.loaded) {
    const a = r.addon;
    lines.push(`  addon      ${a.file}`);
    lines.push(`             loaded as ${a.via}${a.platform === undefined ? '' : ` (${a.platform})`}, version ${a.version ?? 'unknown'}, sha256:${a.sha256}`);
    for (const f of a.failures) lines.push(`             (tried first: ${f})`);
  } else {
    lines.push('  addon      NOT LOADED');
    for (const line of r.addon.error.split('\n')) lines.push(`             ${line}`);
  }
  if (r.versions !== undefined) {
    const v = r.versions;
    lines.push(
      `  formats    findings normalization v${v.findingsNormalization}, resource ledger ${v.ledgerFormat} v${v.ledgerVersion}, vectors ${v.conformanceFormat} v${v.conformanceVersion}`,
    );
  }
  if (r.tokenizer !== undefined) {
    const t = r.tokenizer;
    lines.push(`  tokenizer  ${t.encoding} ${t.loaded ? `loaded in ${t.milliseconds} ms` : `NOT LOADED: ${t.error}`}`);
  }
  if (r.selfCheck !== undefined) {
    const s = r.selfCheck;
    lines.push(`  self-check ${s.passed}/${s.passed + s.failed} smoke vectors passed in ${s.milliseconds} ms (full run: ctxdedup conformance)`);
    for (const f of s.failures) lines.push(`             FAIL ${f}`);
  }
  lines.push(r.ok ? 'ok: this install works as specified' : `problem: ${r.problems.join('; ')}`);
  return `${lines.join('\n')}\n`;
}

/** One-line description of the command (also its help). */
export const DOCTOR_HELP =
  'Usage: ctxdedup doctor [--json]\n\ncheck this install: platform, native addon (which file, from where), versions, and a fast conformance self-check';

/** Runs `ctxdedup doctor [--json]`; returns the exit code (0 healthy, 1 a problem, 2 usage). */
export async function doctor(args: readonly string[], io: Pick<CliIO, 'stdout' | 'stderr'>): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    io.stdout.write(`${DOCTOR_HELP}\n`);
    return EXIT.ok;
  }
  const json = args.includes('--json');
  const unknown = args.filter((a) => a !== '--json');
  if (unknown.length > 0) {
    io.stderr.write(`ctxdedup doctor: unknown argument ${JSON.stringify(unknown[0])} (usage: ctxdedup doctor [--json])\n`);
    return EXIT.usage;
  }
  const report = await diagnose();
  io.stdout.write(json ? `${JSON.stringify(report, null, 2)}\n` : renderDoctor(report));
  return report.ok ? EXIT.ok : EXIT.data;
}
