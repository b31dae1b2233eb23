// Tests for dashboards/flashblocksd.grafana.json against the metrics the daemon really exports: every exported metric
// is on a panel or on LEFT_OFF with its reason, every queried metric and label exists, counters and histograms are
// queried as such, and the JSON has the shape Grafana imports (unique ids, non-overlapping grid). Starts no servers.

import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMetrics } from '../../src/metrics/metrics.js';

const DASHBOARD = new URL('../../dashboards/flashblocksd.grafana.json', import.meta.url);
const PROMTOOL = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
const NO_PROMTOOL = 'promtool not on PATH (apt-get install prometheus); CI installs it and runs this check';

/**
 * Exported metrics no panel shows, each with why. All are Node's default process metrics: every flashblocksd metric
 * of its own is on the dashboard. A metric added to src/metrics/metrics.ts gets a panel or a line here.
 */
const LEFT_OFF: Readonly<Record<string, string>> = {
  flashblocksd_process_virtual_memory_bytes: 'address space V8 and uWS reserve, not memory used: RSS is on Memory',
  flashblocksd_nodejs_eventloop_lag_seconds: 'one sample per scrape; the histogram-based p50/p90/p99/max/mean are shown',
  flashblocksd_nodejs_eventloop_lag_min_seconds: 'the minimum delay is the timer resolution, never a signal',
  flashblocksd_nodejs_eventloop_lag_stddev_seconds: 'spread is read off p50/p90/p99/max on Event-loop lag',
  flashblocksd_nodejs_active_resources: 'the union of active handles and requests, which are shown by type',
  flashblocksd_nodejs_heap_space_size_total_bytes: 'per-space capacity; used bytes per space and the heap total are shown',
  flashblocksd_nodejs_heap_space_size_available_bytes: 'per-space headroom; used bytes per space and the heap total are shown',
  flashblocksd_nodejs_version_info: 'the same Node.js version is the node label of flashblocksd_build_info (Build panel)',
};

interface GridPos { h: number; w: number; x: number; y: number }
interface Target { refId?: string; expr?: string; datasource?: { uid?: string } }
interface Panel {
  id?: number;
  type?: string;
  title?: string;
  gridPos?: GridPos;
  datasource?: { type?: string; uid?: string };
  fieldConfig?: { defaults?: { unit?: string } };
  targets?: Target[];
  panels?: Panel[];
}
interface Dashboard {
  uid?: string;
  title?: string;
  schemaVersion?: number;
  __inputs?: { name: string; type: string }[];
  __requires?: { type: string; id: string }[];
  panels: Panel[];
}

interface Exported { name: string; type: string; labels: Set<string> }

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;

/** Every panel, rows' nested panels included (collapsed rows hold theirs in `panels`). */
function allPanels(ps: readonly Panel[]): Panel[] {
  return ps.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}
const panels = allPanels(dashboard.panels);

function dashboardExprs(): { title: string; expr: string }[] {
  return panels.flatMap((p) => (p.targets ?? []).flatMap((tg) =>
    tg.expr === undefined ? [] : [{ title: p.title ?? `panel ${p.id}`, expr: tg.expr }]));
}

/** The metrics the daemon's registry exports, built the way src/daemon.ts builds it (two upstreams, a stream thread). */
function exportedMetrics(): Map<string, Exported> {
  const m = createMetrics({ version: 'x', commit: 'y', upstreamCount: 2, streamThreads: 1, flashblockIntervalMs: 200 });
  const out = new Map<string, Exported>();
  const all = m.registry.getMetricsAsArray() as unknown as { name: string; type: string; labelNames?: readonly string[] }[];
  for (const metric of all) {
    const labels = new Set(metric.labelNames ?? []);
    if (metric.type === 'histogram') labels.add('le');
    out.set(metric.name, { name: metric.name, type: metric.type, labels });
  }
  return out;
}
const exported = exportedMetrics();

/** The exported metric a series name belongs to: itself, or the histogram of a _bucket/_sum/_count series. */
function familyOf(series: string): { family: Exported | undefined; suffix: string } {
  const direct = exported.get(series);
  if (direct !== undefined) return { family: direct, suffix: '' };
  const m = /^(.*)_(bucket|sum|count)$/.exec(series);
  const family = m === null ? undefined : exported.get(m[1]!);
  return family?.type === 'histogram' ? { family, suffix: m![2]! } : { family: undefined, suffix: '' };
}

/** `flashblocksd_…` series names in a query, with the text before each (to see what function wraps it). */
function seriesIn(expr: string): { series: string; before: string }[] {
  return [...expr.matchAll(/\bflashblocksd_[a-z0-9_]+/g)].map((m) => ({ series: m[0], before: expr.slice(0, m.index) }));
}

t.test('every exported metric is on a panel or on the reasoned LEFT_OFF list', async (t) => {
  t.ok(exported.size >= 80, `${exported.size} metrics exported`);
  const used = new Set<string>();
  for (const { expr } of dashboardExprs()) {
    for (const { series } of seriesIn(expr)) {
      const { family } = familyOf(series);
      if (family !== undefined) used.add(family.name);
    }
  }
  const missing = [...exported.keys()].filter((n) => !used.has(n) && LEFT_OFF[n] === undefined);
  t.same(missing, [], 'exported metrics with neither a panel nor a LEFT_OFF reason');
  for (const [name, why] of Object.entries(LEFT_OFF)) {
    t.ok(exported.has(name), `LEFT_OFF ${name} is exported (else drop its line)`);
    t.notOk(used.has(name), `LEFT_OFF ${name} is not on a panel (else drop its line)`);
    t.ok(why.length > 10, `LEFT_OFF ${name} says why`);
  }
  const own = [...exported.keys()].filter((n) => !/^flashblocksd_(process|nodejs)_/.test(n));
  t.same(own.filter((n) => !used.has(n)), [], 'every flashblocksd metric of its own is on a panel');
  t.ok(Object.keys(LEFT_OFF).length <= 10, 'the left-off list stays short');
});

t.test('the Grafana dashboard only queries metrics and labels that exist', async (t) => {
  t.ok(dashboard.__inputs?.some((i) => i.name === 'DS_PROMETHEUS' && i.type === 'datasource'), 'DS_PROMETHEUS input');
  const exprs = dashboardExprs();
  t.ok(exprs.length >= 60, `${exprs.length} queries`);
  const TARGET_LABELS = ['instance', 'job'];
  for (const { title, expr } of exprs) {
    const found = seriesIn(expr);
    t.ok(found.length > 0, `${title}: references a flashblocksd metric`);
    const allowed = new Set(TARGET_LABELS);
    for (const { series } of found) {
      const { family } = familyOf(series);
      t.ok(family !== undefined, `${title}: ${series} is exported`);
      for (const l of family?.labels ?? []) allowed.add(l);
    }
    const used = new Set<string>();
    for (const g of expr.matchAll(/\b(?:by|without|on|ignoring)\s*\(([^)]*)\)/g)) {
      for (const l of g[1]!.split(',')) if (l.trim() !== '') used.add(l.trim());
    }
    for (const g of expr.matchAll(/\{([^}]*)\}/g)) {
      for (const sel of g[1]!.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)) used.add(sel[1]!);
    }
    for (const l of used) t.ok(allowed.has(l), `${title}: label ${l} exists on the queried metrics`);
  }
});

t.test('counters are queried through rate() or increase(), histograms through their buckets', async (t) => {
  const RANGE_FN = /\b(?:rate|irate|increase)\(\s*$/;
  for (const { title, expr } of dashboardExprs()) {
    for (const { series, before } of seriesIn(expr)) {
      const { family, suffix } = familyOf(series);
      if (family === undefined) continue; // reported by the test above
      const where = `${title}: ${series}`;
      if (family.type === 'counter' || suffix !== '') {
        t.match(before, RANGE_FN, `${where} is inside rate()/increase()`);
      } else {
        t.notMatch(before, RANGE_FN, `${where} (a ${family.type}) is not inside rate()/increase()`);
      }
      if (family.type === 'histogram') t.not(suffix, '', `${where}: a histogram is queried as _bucket, _sum or _count`);
      if (suffix === 'bucket') {
        t.match(before, /histogram_quantile\(\s*[0-9.]+\s*,\s*sum\s+by\s*\([^)]*\ble\b[^)]*\)\s*\(\s*rate\(\s*$/,
          `${where} feeds histogram_quantile(q, sum by (le, …) (rate(…)))`);
      }
    }
  }
});

t.test('the dashboard JSON has the shape Grafana imports', async (t) => {
  t.equal(typeof dashboard.uid, 'string', 'uid');
  t.equal(typeof dashboard.title, 'string', 'title');
  t.ok((dashboard.schemaVersion ?? 0) >= 36, 'schemaVersion of Grafana 9 or later');

  const ids = panels.map((p) => p.id);
  t.ok(ids.every((id) => Number.isInteger(id) && id! > 0), 'every panel has a positive integer id');
  t.same(ids.filter((id, i) => ids.indexOf(id) !== i), [], 'panel ids are unique');

  const required = new Set((dashboard.__requires ?? []).filter((r) => r.type === 'panel').map((r) => r.id));
  t.equal(dashboard.panels[0]?.type, 'row', 'the dashboard opens with a row');
  const problems: string[] = [];
  for (const p of panels) {
    const name = `${p.title ?? '?'} (id ${p.id})`;
    const g = p.gridPos;
    if (g === undefined || ![g.h, g.w, g.x, g.y].every((v) => Number.isInteger(v) && v >= 0)) {
      problems.push(`${name}: gridPos is not four non-negative integers`);
      continue;
    }
    if (g.w < 1 || g.h < 1 || g.x + g.w > 24) problems.push(`${name}: does not fit the 24-column grid`);
    if (p.type === 'row') {
      if (g.x !== 0 || g.w !== 24 || g.h !== 1) problems.push(`${name}: a row spans the grid at height 1`);
      continue;
    }
    if (!required.has(p.type ?? '')) problems.push(`${name}: panel type ${p.type} is not in __requires`);
    if (p.datasource?.uid !== '${DS_PROMETHEUS}') problems.push(`${name}: does not use the DS_PROMETHEUS input`);
    const unit = p.fieldConfig?.defaults?.unit;
    if (typeof unit !== 'string' || unit === '') problems.push(`${name}: no unit`);
    const refs = (p.targets ?? []).map((tg) => tg.refId);
    if (refs.length === 0) problems.push(`${name}: no queries`);
    if (refs.some((r, i) => r === undefined || refs.indexOf(r) !== i)) problems.push(`${name}: refIds missing or repeated`);
  }
  t.same(problems, [], `${panels.length} panels: grid, type, data source, unit, queries`);

  const placed = dashboard.panels.filter((p) => p.gridPos !== undefined);
  const overlaps: string[] = [];
  for (let i = 0; i < placed.length; i++) {
    for (let j = i + 1; j < placed.length; j++) {
      const a = placed[i]!.gridPos!;
      const b = placed[j]!.gridPos!;
      if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h) {
        overlaps.push(`${placed[i]!.title} / ${placed[j]!.title}`);
      }
    }
  }
  t.same(overlaps, [], 'no two panels overlap');
  const ys = dashboard.panels.map((p) => p.gridPos?.y ?? 0);
  t.same(ys, [...ys].sort((a, b) => a - b), 'panels are listed top to bottom (the order Grafana keeps rows in)');
});

t.test('the dashboard queries parse as PromQL (promtool check rules)', { skip: PROMTOOL ? false : NO_PROMTOOL }, async (t) => {
  const rules = dashboardExprs().map(({ expr }, i) =>
    `      - record: dashboard:query_${i}\n        expr: ${JSON.stringify(
      expr.replaceAll('$__rate_interval', '1m').replaceAll('$__range', '1h').replaceAll('$instance', '.+'))}\n`);
  const dir = mkdtempSync(join(tmpdir(), 'fbd-dash-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'rules.yml');
  writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${rules.join('')}`);
  const r = spawnSync('promtool', ['check', 'rules', file], { encoding: 'utf8' });
  t.equal(r.status, 0, `${r.stdout}${r.stderr}`);
});
