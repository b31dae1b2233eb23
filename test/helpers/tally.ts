// Counts of compared and differing values by row (a tx kind, an account class) and column (a field), with the
// first examples of each difference, printed as a table for a test's closing comment. Test-only.

/** One cell: how many values were compared and how many differed. */
export interface Cell {
  compared: number;
  differed: number;
}

/** A table of comparisons; rows and columns appear in first-use order. */
export class Tally {
  private readonly cells = new Map<string, Map<string, Cell>>();
  private readonly columns: string[] = [];
  readonly examples: string[] = [];

  constructor(private readonly maxExamples = 20) {}

  /** Counts one comparison of `column` in `row`; `diff` (non-null) is a difference, kept as an example. */
  add(row: string, column: string, diff: string | null): void {
    let r = this.cells.get(row);
    if (r === undefined) this.cells.set(row, (r = new Map()));
    let c = r.get(column);
    if (c === undefined) r.set(column, (c = { compared: 0, differed: 0 }));
    if (!this.columns.includes(column)) this.columns.push(column);
    c.compared++;
    if (diff !== null) {
      c.differed++;
      if (this.examples.length < this.maxExamples) this.examples.push(`${row} ${column}: ${diff}`);
    }
  }

  get compared(): number {
    return this.sum((c) => c.compared);
  }

  get differed(): number {
    return this.sum((c) => c.differed);
  }

  /** Columns with a difference, as "row column: n of m". */
  differences(): string[] {
    const out: string[] = [];
    for (const [row, r] of this.cells) for (const [col, c] of r) if (c.differed > 0) out.push(`${row} ${col}: ${c.differed} of ${c.compared}`);
    return out;
  }

  /** The table: one line per row, "column compared/differed" cells. */
  format(title: string): string {
    const lines = [title];
    for (const [row, r] of this.cells) {
      const cells = this.columns.filter((c) => r.has(c)).map((c) => `${c} ${r.get(c)!.compared}/${r.get(c)!.differed}`);
      lines.push(`  ${row.padEnd(12)} ${cells.join(', ')}`);
    }
    return lines.join('\n');
  }

  private sum(f: (c: Cell) => number): number {
    let n = 0;
    for (const r of this.cells.values()) for (const c of r.values()) n += f(c);
    return n;
  }
}
