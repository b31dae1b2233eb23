// Reading a Prometheus text exposition in tests: one series, or a family summed. Pure; no scraping here.

/** The sum of a family's series in a /metrics text, or one series when `name` carries its labels (`x{a="b"}`). */
export function metricValue(text: string, name: string): number {
  let sum = 0;
  const exact = name.includes('{');
  for (const line of text.split('\n')) {
    if (exact ? line.startsWith(name + ' ') : line.startsWith(name + ' ') || line.startsWith(name + '{')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}
