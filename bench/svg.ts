// A tiny SVG chart generator for BENCHMARKS.md (no dependencies): line charts with linear or log axes, and latency
// CDFs built on them. Output is a self-contained SVG string that GitHub renders as an image.

export interface Series {
  name: string;
  points: [number, number][];
  /** Draw as a dashed line (e.g. a baseline). */
  dashed?: boolean;
}

export interface LineChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  logX?: boolean;
  logY?: boolean;
  /** Force the y range (e.g. [0, 1] for a CDF). */
  yRange?: [number, number];
  /** Horizontal reference lines, e.g. a budget. */
  hLines?: { y: number; label: string }[];
  /** Vertical reference lines, e.g. a budget. */
  vLines?: { x: number; label: string }[];
  width?: number;
  height?: number;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function label(v: number): string {
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toPrecision(3)}k`;
  if (a >= 1) return String(+v.toPrecision(3));
  return String(+v.toPrecision(2));
}

/** "Nice" linear ticks covering [lo, hi]. */
function linearTicks(lo: number, hi: number, n = 6): number[] {
  const span = hi - lo || Math.abs(hi) || 1;
  const step0 = span / n;
  const mag = 10 ** Math.floor(Math.log10(step0));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= step0) ?? 10 * mag;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

/** Decade ticks (1, 10, 100, … with 2 and 5 when few decades) covering [lo, hi]. */
function logTicks(lo: number, hi: number): number[] {
  const out: number[] = [];
  const d0 = Math.floor(Math.log10(lo));
  const d1 = Math.ceil(Math.log10(hi));
  const mults = d1 - d0 <= 3 ? [1, 2, 5] : [1];
  for (let d = d0; d <= d1; d++) for (const m of mults) {
    const v = m * 10 ** d;
    if (v >= lo * 0.999 && v <= hi * 1.001) out.push(+v.toPrecision(6));
  }
  return out;
}

/** Renders a line chart. Non-finite points and, on log axes, non-positive values are skipped. */
export function lineChart(o: LineChartOptions): string {
  const W = o.width ?? 720;
  const H = o.height ?? 380;
  const m = { l: 70, r: 20, t: 36, b: 50 + 18 * Math.ceil(o.series.length / 3) };
  const pw = W - m.l - m.r;
  const ph = H - m.t - m.b;
  const ok = (x: number, y: number): boolean => Number.isFinite(x) && Number.isFinite(y) && (!o.logX || x > 0) && (!o.logY || y > 0);
  const pts = o.series.flatMap((s) => s.points.filter(([x, y]) => ok(x, y)));
  let [x0, x1] = pts.length === 0 ? [0, 1] : [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))];
  let [y0, y1] = o.yRange ?? (pts.length === 0 ? [0, 1] : [Math.min(...pts.map((p) => p[1])), Math.max(...pts.map((p) => p[1]))]);
  for (const h of o.hLines ?? []) [y0, y1] = [Math.min(y0, h.y), Math.max(y1, h.y)];
  for (const v of o.vLines ?? []) [x0, x1] = [Math.min(x0, v.x), Math.max(x1, v.x)];
  if (!o.logY && o.yRange === undefined) {
    y0 = Math.min(0, y0);
    y1 = y1 + (y1 - y0) * 0.05 || 1;
  }
  if (x1 === x0) x1 = x0 + (o.logX ? x0 : 1);
  if (y1 === y0) y1 = y0 + (o.logY ? y0 : 1);
  const tx = o.logX ? (x: number) => (Math.log10(x) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0)) : (x: number) => (x - x0) / (x1 - x0);
  const ty = o.logY ? (y: number) => (Math.log10(y) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0)) : (y: number) => (y - y0) / (y1 - y0);
  const X = (x: number): number => +(m.l + tx(x) * pw).toFixed(1);
  const Y = (y: number): number => +(m.t + ph - ty(y) * ph).toFixed(1);

  const el: string[] = [];
  el.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  el.push(`<rect width="${W}" height="${H}" fill="#fff"/>`);
  el.push(`<text x="${W / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${esc(o.title)}</text>`);
  for (const v of o.logX ? logTicks(x0, x1) : linearTicks(x0, x1)) {
    el.push(`<line x1="${X(v)}" y1="${m.t}" x2="${X(v)}" y2="${m.t + ph}" stroke="#eee"/>`);
    el.push(`<text x="${X(v)}" y="${m.t + ph + 16}" text-anchor="middle" fill="#444">${label(v)}</text>`);
  }
  for (const v of o.logY ? logTicks(y0, y1) : linearTicks(y0, y1)) {
    el.push(`<line x1="${m.l}" y1="${Y(v)}" x2="${m.l + pw}" y2="${Y(v)}" stroke="#eee"/>`);
    el.push(`<text x="${m.l - 6}" y="${Y(v) + 4}" text-anchor="end" fill="#444">${label(v)}</text>`);
  }
  el.push(`<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`);
  el.push(`<text x="${m.l + pw / 2}" y="${m.t + ph + 34}" text-anchor="middle">${esc(o.xLabel)}</text>`);
  el.push(`<text transform="translate(16 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`);
  for (const h of o.hLines ?? []) {
    el.push(`<line x1="${m.l}" y1="${Y(h.y)}" x2="${m.l + pw}" y2="${Y(h.y)}" stroke="#999" stroke-dasharray="2 3"/>`);
    el.push(`<text x="${m.l + pw - 4}" y="${Y(h.y) - 4}" text-anchor="end" fill="#666">${esc(h.label)}</text>`);
  }
  for (const v of o.vLines ?? []) {
    el.push(`<line x1="${X(v.x)}" y1="${m.t}" x2="${X(v.x)}" y2="${m.t + ph}" stroke="#999" stroke-dasharray="2 3"/>`);
    el.push(`<text x="${X(v.x) + 4}" y="${m.t + 14}" fill="#666">${esc(v.label)}</text>`);
  }
  o.series.forEach((s, i) => {
    const c = COLORS[i % COLORS.length]!;
    const p = s.points.filter(([x, y]) => ok(x, y)).map(([x, y]) => `${X(x)},${Y(y)}`);
    if (p.length === 1) el.push(`<circle cx="${p[0]!.split(',')[0]}" cy="${p[0]!.split(',')[1]}" r="3" fill="${c}"/>`);
    else if (p.length > 1) el.push(`<polyline fill="none" stroke="${c}" stroke-width="1.8"${s.dashed === true ? ' stroke-dasharray="6 4"' : ''} points="${p.join(' ')}"/>`);
    const lx = m.l + (i % 3) * (pw / 3);
    const ly = m.t + ph + 52 + 18 * Math.floor(i / 3);
    el.push(`<line x1="${lx}" y1="${ly - 4}" x2="${lx + 22}" y2="${ly - 4}" stroke="${c}" stroke-width="2"${s.dashed === true ? ' stroke-dasharray="6 4"' : ''}/>`);
    el.push(`<text x="${lx + 28}" y="${ly}">${esc(s.name)}</text>`);
  });
  el.push('</svg>');
  return el.join('\n') + '\n';
}

/** Downsamples a series to at most `n` points (keeps first and last). */
export function thin(points: [number, number][], n = 400): [number, number][] {
  if (points.length <= n) return points;
  const step = (points.length - 1) / (n - 1);
  return Array.from({ length: n }, (_, i) => points[Math.round(i * step)]!);
}

/** CDF points of raw values: [value, fraction ≤ value], at most ~400 points. */
export function cdfPoints(values: number[]): [number, number][] {
  const v = [...values].sort((a, b) => a - b);
  return thin(v.map((x, i) => [x, (i + 1) / v.length] as [number, number]));
}

/** A latency CDF chart (log x axis), one line per series of [value, fraction] points. */
export function cdfChart(title: string, xLabel: string, series: Series[], vLines?: { x: number; label: string }[]): string {
  return lineChart({ title, xLabel, yLabel: 'fraction ≤ x', series: series.map((s) => ({ ...s, points: thin(s.points) })), logX: true, yRange: [0, 1], vLines });
}
