export type Cell = string | number;
export type Row = Record<string, Cell>;

/** Numbers as people read them: grouped integers, three significant digits for small fractions. */
export function formatCell(value: Cell): string {
  if (typeof value === 'string') return value;
  if (!Number.isFinite(value)) return String(value);
  if (Number.isInteger(value)) return value.toLocaleString('en-US');
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value).toLocaleString('en-US');
  if (abs >= 100) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(2);
  return value.toPrecision(3);
}

/**
 * An aligned plain-text table: columns are the rows' keys in order of first appearance, numbers
 * right-aligned, text left-aligned, a missing cell blank.
 */
export function formatTable(title: string, rows: readonly Row[]): string {
  const lines = [title];
  if (rows.length === 0) return [...lines, '  (no rows)'].join('\n');
  const columns: string[] = [];
  for (const row of rows) for (const key of Object.keys(row)) if (!columns.includes(key)) columns.push(key);
  const cells = rows.map((row) => columns.map((c) => (c in row ? formatCell(row[c]!) : '')));
  const numeric = columns.map((c) => rows.every((row) => !(c in row) || typeof row[c] === 'number'));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i]!.length)));
  const render = (values: string[]) =>
    `  ${values.map((v, i) => (numeric[i] ? v.padStart(widths[i]!) : v.padEnd(widths[i]!))).join('  ')}`.trimEnd();
  lines.push(render(columns));
  lines.push(`  ${widths.map((w) => '-'.repeat(w)).join('  ')}`);
  for (const r of cells) lines.push(render(r));
  return lines.join('\n');
}

/** Prints formatTable(title, rows) and a blank line to stdout. */
export function printTable(title: string, rows: readonly Row[]): void {
  process.stdout.write(`${formatTable(title, rows)}\n\n`);
}
