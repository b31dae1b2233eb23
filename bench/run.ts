// Runs every benchmark in bench/ (one concern per file, each side by side with its baseline) and writes
// BENCHMARKS.md with machine, Node version, commit and date, a DESIGN §9 summary collected from the suites' rows,
// their tables, notes and SVG plots (bench/results/). Flags: `--quick` for a short run; `--only=a,b` to select
// (with `--merge`: only those sections are replaced in the existing BENCHMARKS.md, the header says so);
// `--profile` to CPU-profile in a quick run too (full runs profile by default; `--no-profile` turns that off).
import { execSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { fmt, optionsFromArgv, type BenchOptions, type BenchResult, type BenchRow } from './lib.js';

const SUITES = ['ingest', 'keccak', 'recover', 'rpc', 'pinning', 'fanout', 'combined', 'saturation', 'memory', 'exec', 'engine', 'trace', 'seam', 'limits'];

/** DESIGN §9, in order; each suite tags its rows with one of these (by prefix) in `design`. */
const DESIGN_ROWS = [
  'parse + apply of a 150 KB / 200-tx flashblock ≤ 1.0× bare JSON.parse',
  'parse + apply of a 150 KB / 200-tx flashblock: p99 < 3 ms',
  'frame arrival → receipt visible over RPC',
  'frame arrival → executed state visible (eth_call pending), 200-tx flashblock',
  'pending receipt lookups ≥ 80 % of a uWS static response',
  'pending receipt lookups ≥ 2× node:http',
  'fan-out to 1,000 subscribers',
  'forwarded call overhead',
  'memory flat over 1 M flashblocks',
];

function commit(): string {
  try {
    const sha = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
    // The run's own outputs (bench/results/*.svg) do not make the measured code dirty.
    const dirty = execSync("git status --porcelain -- src bench ':!bench/results'", { encoding: 'utf8' }).trim() !== '';
    return dirty ? `${sha} (with uncommitted changes in src/ or bench/)` : sha;
  } catch {
    return 'unknown';
  }
}

const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const value = (r: BenchRow): string => r.display ?? `${fmt(r.value)} ${r.unit}`.trim();
const baseline = (r: BenchRow): string => (r.baseline === undefined ? '' : `${r.baseline.label}: ${r.baseline.display ?? `${fmt(r.baseline.value)} ${r.unit}`.trim()}`);
const met = (r: BenchRow): string => (r.met === undefined ? '' : r.met ? 'met' : '**not met**');

function summary(results: BenchResult[], failures: string[]): string[] {
  const tagged = results.flatMap((res) => res.rows.filter((r) => r.design !== undefined).map((r) => ({ r, section: res.title })));
  const lines = [
    '## DESIGN §9 summary',
    '',
    '| Budget (DESIGN §9) | Measured | Baseline (same run) | Ratio / target | Met | Bottleneck (when not met) |',
    '|---|---|---|---|---|---|',
  ];
  for (const d of DESIGN_ROWS) {
    const rows = tagged.filter((t) => t.r.design!.startsWith(d));
    if (rows.length === 0) {
      const why = failures.length > 0 ? 'suite failed or not run (see below)' : 'suite not run (--only)';
      lines.push(`| ${cell(d)} | — | | | — | ${why} |`);
      continue;
    }
    for (const { r, section } of rows) {
      lines.push(`| ${cell(r.design!)} | ${cell(value(r))} | ${cell(baseline(r))} | ${cell(r.verdict ?? '')} | ${met(r)} | ${cell(r.met === false ? (r.bottleneck ?? '') : '')} ${r.met === false ? `(${cell(section)})` : ''} |`);
    }
  }
  lines.push('');
  return lines;
}

function render(results: BenchResult[], opts: BenchOptions, failures: string[], seconds: number): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  const lines = [
    '# Benchmarks',
    '',
    'Written by `npm run bench` (do not edit by hand; `npm run bench -- --quick` for a short run). Every subject is measured next to its',
    'baseline in the same run; plots are SVGs in [bench/results/](bench/results/) written by the same run.',
    '',
    `- date: ${new Date().toISOString()}`,
    `- commit: ${commit()}`,
    `- machine: ${os.cpus().length} × ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}; load average at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}`,
    `- node: ${process.version}`,
    `- mode: ${opts.quick ? 'quick (--quick)' : 'full'}${opts.profile === true ? ', profiled' : ''}; wall time ${fmt(seconds)} s`,
    '',
    ...summary(results, failures),
  ];
  for (const r of results) {
    lines.push(`## ${r.title}`, '', '| What | Measured | Baseline (same run) | Ratio / target | Met |', '|---|---|---|---|---|');
    for (const row of r.rows) lines.push(`| ${cell(row.name)} | ${cell(value(row))} | ${cell(baseline(row))} | ${cell(row.verdict ?? '')} | ${met(row)} |`);
    lines.push('');
    for (const row of r.rows) if (row.met === false && row.bottleneck !== undefined) lines.push(`**Not met — ${row.name}:** ${row.bottleneck}`, '');
    if (r.notes !== undefined) lines.push(r.notes, '');
    for (const p of r.plots ?? []) lines.push(`![${p.alt}](${p.path})`, '');
  }
  if (failures.length > 0) lines.push('## Benchmarks that failed to run', '', ...failures.map((f) => `- ${f}`), '');
  return lines.join('\n');
}

/**
 * The DESIGN §9 summary of `existing` with the rows `results` measure put in place of the old ones (a row's first
 * cell starts with its budget); rows of suites not re-run stay as they were.
 */
function mergeSummary(existing: string, results: BenchResult[]): string {
  const start = existing.indexOf('## DESIGN §9 summary\n');
  if (start < 0) return existing;
  const end = existing.indexOf('\n## ', start + 1);
  let table = existing.slice(start, end < 0 ? undefined : end + 1).split('\n');
  const fresh = summary(results, []);
  for (const d of DESIGN_ROWS) {
    const prefix = `| ${cell(d)}`;
    const rows = fresh.filter((l) => l.startsWith(prefix) && !l.includes('| — |'));
    if (rows.length === 0) continue;
    const at = table.findIndex((l) => l.startsWith(prefix));
    const kept = table.filter((l) => !l.startsWith(prefix));
    const lastRow = kept.reduce((last, l, i) => (l.startsWith('|') ? i : last), -1);
    kept.splice(at < 0 ? lastRow + 1 : at, 0, ...rows);
    table = kept;
  }
  return existing.slice(0, start) + table.join('\n') + (end < 0 ? '' : existing.slice(end + 1));
}

/**
 * `existing` (BENCHMARKS.md) with the sections of `results` put in place of the ones with the same title (or added
 * at the end), and a header line saying which sections were re-run, when, where and at which commit (--merge: one
 * suite re-run without the hours of a full run; everything else stays as that run measured it).
 */
function merge(existing: string, results: BenchResult[], opts: BenchOptions, seconds: number): string {
  const fresh = render(results, opts, [], seconds);
  let out = existing.replace(/\n+$/, '') + '\n';
  for (const r of results) {
    const head = `## ${r.title}`;
    const start = fresh.indexOf(head);
    const next = fresh.indexOf('\n## ', start + head.length);
    const section = fresh.slice(start, next < 0 ? undefined : next + 1).replace(/\n+$/, '') + '\n';
    const at = out.indexOf(head + '\n');
    if (at < 0) out = out + '\n' + section;
    else {
      const end = out.indexOf('\n## ', at + head.length);
      out = out.slice(0, at) + section + (end < 0 ? '' : out.slice(end));
    }
  }
  out = mergeSummary(out, results);
  const note = `- re-run since (--merge): ${results.map((r) => `"${r.title}"`).join(', ')} on ${new Date().toISOString()} at commit ${commit()}, ${opts.quick ? 'quick' : 'full'}; load average at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}`;
  return out.replace(/(\n- mode: [^\n]*\n)/, `$1${note}\n`);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const opts = optionsFromArgv(argv);
  const onlyArg = argv.find((a) => a.startsWith('--only='));
  const only = onlyArg === undefined ? SUITES : onlyArg.slice('--only='.length).split(',');
  const unknown = argv.filter((a) => !['--quick', '--profile', '--no-profile', '--merge'].includes(a) && !a.startsWith('--only='));
  if (unknown.length > 0) {
    process.stderr.write(`bench: unknown argument(s) ${unknown.join(' ')}; use --quick, --only=${SUITES.join(',')}, --merge, --profile, --no-profile\n`);
    process.exit(2);
  }
  const t0 = performance.now();
  const results: BenchResult[] = [];
  const failures: string[] = [];
  for (const name of only) {
    const file = fileURLToPath(new URL(`./${name}.ts`, import.meta.url));
    if (!SUITES.includes(name) || !existsSync(file)) {
      failures.push(`${name}: not a benchmark (known: ${SUITES.join(', ')})`);
      continue;
    }
    const ts = performance.now();
    process.stderr.write(`bench: ${name} …\n`);
    try {
      const mod = (await import(`./${name}.ts`)) as { run(o: BenchOptions): Promise<BenchResult> };
      results.push(await mod.run(opts));
      process.stderr.write(`bench: ${name} done in ${fmt((performance.now() - ts) / 1000)} s\n`);
    } catch (e) {
      failures.push(`${name}: ${(e as Error).stack ?? (e as Error).message}`.split('\n').slice(0, 3).join(' '));
      process.stderr.write(`bench: ${name} failed: ${(e as Error).message}\n`);
    }
  }
  const out = fileURLToPath(new URL('../BENCHMARKS.md', import.meta.url));
  const seconds = (performance.now() - t0) / 1000;
  if (argv.includes('--merge') && failures.length === 0) writeFileSync(out, merge(readFileSync(out, 'utf8'), results, opts, seconds));
  else writeFileSync(out, render(results, opts, failures, seconds));
  process.stderr.write(`bench: wrote ${out} in ${fmt((performance.now() - t0) / 1000)} s\n`);
  // Children and sockets of the suites are closed; exit even if a stray handle (autocannon, agents) lingers.
  process.exit(failures.length > 0 ? 1 : 0);
}

void main();
