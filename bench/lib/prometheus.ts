// Prometheus text exposition, read back: a worker's /metrics (ours plus Temporal core's) or the
// Temporal dev server's, scraped before and after a window and subtracted.

/** One sample line: `name{label="value",…} 12.5`. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * The samples of a /metrics text (comments and unparsable lines skipped), only those named in
 * `names` if given: a server's text can run to tens of MB (a label set per task queue).
 */
export function parseMetrics(text: string, names?: ReadonlySet<string>): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const brace = line.indexOf('{');
    const space = line.lastIndexOf(' ');
    if (space < 0) continue;
    const name = brace >= 0 && brace < space ? line.slice(0, brace) : line.slice(0, space);
    if (names && !names.has(name)) continue;
    const value = Number(line.slice(space + 1));
    if (!Number.isFinite(value)) continue;
    const labels: Record<string, string> = {};
    if (brace >= 0 && brace < space) {
      for (const m of line.slice(brace + 1, line.lastIndexOf('}')).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
    }
    samples.push({ name, labels, value });
  }
  return samples;
}

/** The sum of the samples named `name` whose labels include every one of `labels`. */
export function sumOf(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

/** Per value of label `by`: the sum of the samples named `name` matching `labels`. */
export function sumBy(samples: readonly Sample[], name: string, by: string, labels: Record<string, string> = {}): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) {
    if (s.name !== name || !Object.entries(labels).every(([k, v]) => s.labels[k] === v)) continue;
    const key = s.labels[by] ?? '';
    out[key] = (out[key] ?? 0) + s.value;
  }
  return out;
}

/** GETs a /metrics URL and parses it (the samples named in `names`, if given). */
export async function scrapeMetrics(url: string, timeoutMs = 5_000, names?: ReadonlySet<string>): Promise<Sample[]> {
  const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return parseMetrics(await response.text(), names);
}

