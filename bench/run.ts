// Runs every benchmark in bench/ (one concern per file, each side by side with its baseline) and writes
// BENCHMARKS.md with machine, Node version, commit and date. `--quick` for a short run; `--only a,b` to select.
import { execSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { fmt, type BenchOptions, type BenchResult } from './lib.js';

const SUITES = ['ingest', 'recover', 'rpc', 'fanout'];

function commit(): string {
  try {
    return execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

function render(results: BenchResult[], opts: BenchOptions, failures: string[]): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  const lines = [
    '# Benchmarks',
    '',
    'Written by `npm run bench` (do not edit by hand). Every subject is measured next to its baseline in the same run.',
    '',
    `- date: ${new Date().toISOString()}`,
    `- commit: ${commit()}`,
    `- machine: ${os.cpus().length} × ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}`,
    `- node: ${process.version}`,
    `- mode: ${opts.quick ? 'quick (--quick)' : 'full'}`,
    '',
  ];
  for (const r of results) {
    lines.push(`## ${r.title}`, '', '| what | value | baseline (same run) | ratio / target | met |', '|---|---|---|---|---|');
    for (const row of r.rows) {
      const base = row.baseline === undefined ? '' : `${row.baseline.label}: ${fmt(row.baseline.value)} ${row.unit}`;
      const met = row.met === undefined ? '' : row.met ? 'met' : '**not met**';
      lines.push(`| ${row.name} | ${fmt(row.value)} ${row.unit} | ${base} | ${row.verdict ?? ''} | ${met} |`);
    }
    lines.push('');
    if (r.notes !== undefined) lines.push(r.notes, '');
  }
  if (failures.length > 0) lines.push('## Benchmarks that failed to run', '', ...failures.map((f) => `- ${f}`), '');
  return lines.join('\n');
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const opts: BenchOptions = { quick: argv.includes('--quick') };
  const onlyArg = argv.find((a) => a.startsWith('--only='));
  const only = onlyArg === undefined ? SUITES : onlyArg.slice('--only='.length).split(',');
  const results: BenchResult[] = [];
  const failures: string[] = [];
  for (const name of only) {
    const file = fileURLToPath(new URL(`./${name}.ts`, import.meta.url));
    if (!existsSync(file)) {
      failures.push(`${name}: bench/${name}.ts not found`);
      continue;
    }
    process.stderr.write(`bench: ${name} …\n`);
    try {
      const mod = (await import(`./${name}.ts`)) as { run(o: BenchOptions): Promise<BenchResult> };
      results.push(await mod.run(opts));
    } catch (e) {
      failures.push(`${name}: ${(e as Error).message}`);
    }
  }
  const out = fileURLToPath(new URL('../BENCHMARKS.md', import.meta.url));
  writeFileSync(out, render(results, opts, failures));
  process.stderr.write(`bench: wrote ${out}\n`);
  if (failures.length > 0) process.exitCode = 1;
}

void main();
