import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isQuick, positionalArgs, sized } from '../../../bench/lib/args';
import { commitLags, percentile } from '../../../bench/lib/commit-lag';
import { machineBusyMs, processMemoryMb, threadCpuDelta, threadCpuMs } from '../../../bench/lib/cpu';
import { discoverBenchmarks, readAllResults, writeResults } from '../../../bench/lib/results';
import { formatCell, formatTable } from '../../../bench/lib/table';
import { measure, median, perSecond, ratio } from '../../../bench/lib/timing';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'bench-lib-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('writeResults', () => {
  it('writes figures, machine, versions and time as pretty JSON, and returns the path', () => {
    const before = Date.now();
    const file = writeResults('codec', { compress_mb_s: 1100.5, ratio_vs_raw: 0.25 }, {
      outDir: dir,
      versions: { kafka: '3.9.0' },
      notes: { payloadBytes: 10_000 },
    });
    expect(file).toBe(path.join(dir, 'codec.json'));
    const text = readFileSync(file, 'utf8');
    expect(text).toContain('\n  "figures": {\n');
    const json = JSON.parse(text);
    expect(json.figures).toEqual({ compress_mb_s: 1100.5, ratio_vs_raw: 0.25 });
    expect(json.machine.cpus.count).toBeGreaterThan(0);
    expect(typeof json.machine.cpus.model).toBe('string');
    expect(json.machine.memoryBytes).toBeGreaterThan(0);
    expect(json.machine.node).toBe(process.version);
    expect(json.machine.os).toMatch(/\S+ \S+ \S+/);
    expect(json.versions).toMatchObject({ kafka: '3.9.0', 'kafka-flow-temporal': expect.any(String) });
    expect(json.versions['lz4-napi']).toMatch(/^\d+\.\d+\.\d+/);
    expect(json.versions.kafkajs).toMatch(/^\d+\.\d+\.\d+/);
    expect(Date.parse(json.at)).toBeGreaterThanOrEqual(before - 1000);
    expect(json.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(json.quick).toBe(false);
    expect(json.notes).toEqual({ payloadBytes: 10_000 });
  });

  it('honours BENCH_RESULTS_DIR and creates the directory', () => {
    const nested = path.join(dir, 'a', 'b');
    process.env.BENCH_RESULTS_DIR = nested;
    try {
      expect(writeResults('x', { n: 1 })).toBe(path.join(nested, 'x.json'));
    } finally {
      delete process.env.BENCH_RESULTS_DIR;
    }
  });

  it('refuses non-finite figures and names that are not file names', () => {
    expect(() => writeResults('x', { n: Number.NaN }, { outDir: dir })).toThrow(/finite/);
    expect(() => writeResults('x', { n: Number.POSITIVE_INFINITY }, { outDir: dir })).toThrow(/finite/);
    expect(() => writeResults('../x', { n: 1 }, { outDir: dir })).toThrow(/name/);
  });

  it('reads back every results file, skipping others', () => {
    writeResults('b', { y: 2 }, { outDir: dir });
    writeResults('a', { x: 1 }, { outDir: dir });
    writeFileSync(path.join(dir, 'junk.json'), '{not json');
    writeFileSync(path.join(dir, 'other.json'), '{"no":"figures"}');
    const all = readAllResults(dir);
    expect([...all.keys()]).toEqual(['a', 'b']);
    expect(all.get('a')?.figures).toEqual({ x: 1 });
    expect(readAllResults(path.join(dir, 'missing')).size).toBe(0);
  });
});

describe('discoverBenchmarks', () => {
  it('lists bench:<name> scripts whose bench/<name>.ts exists, in package.json order', () => {
    mkdirSync(path.join(dir, 'bench'));
    for (const name of ['codec', 'kafka']) writeFileSync(path.join(dir, 'bench', `${name}.ts`), '');
    const scripts = { bench: 'x', 'bench:kafka': 'x', 'bench:codec': 'x', 'bench:gone': 'x', test: 'jest' };
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ scripts }));
    expect(discoverBenchmarks(dir)).toEqual(['kafka', 'codec']);
  });
});

describe('formatTable', () => {
  it('aligns columns: text left, numbers right, missing cells blank', () => {
    const out = formatTable('Codec', [
      { case: 'raw', mb_s: 1234.5678, n: 1000 },
      { case: 'lz4 compressed', mb_s: 0.123456 },
    ]);
    expect(out.split('\n')).toEqual([
      'Codec',
      '  case             mb_s      n',
      '  --------------  -----  -----',
      '  raw             1,235  1,000',
      '  lz4 compressed  0.123',
    ]);
  });

  it('says when there are no rows', () => {
    expect(formatTable('Empty', [])).toBe('Empty\n  (no rows)');
  });

  it('formats numbers for reading', () => {
    expect(formatCell(1234567)).toBe('1,234,567');
    expect(formatCell(123.456)).toBe('123.5');
    expect(formatCell(2.5)).toBe('2.50');
    expect(formatCell(0.012345)).toBe('0.0123');
    expect(formatCell('text')).toBe('text');
  });
});

describe('args', () => {
  it('is quick with --quick or BENCH_QUICK=1', () => {
    expect(isQuick(['node', 'x.ts'], {})).toBe(false);
    expect(isQuick(['node', 'x.ts', '--quick'], {})).toBe(true);
    expect(isQuick(['node', 'x.ts'], { BENCH_QUICK: '1' })).toBe(true);
    expect(isQuick(['node', 'x.ts'], { BENCH_QUICK: 'true' })).toBe(true);
    expect(isQuick(['node', 'x.ts'], { BENCH_QUICK: '0' })).toBe(false);
    expect(sized(100, 5, ['node', 'x', '--quick'], {})).toBe(5);
    expect(sized(100, 5, ['node', 'x'], {})).toBe(100);
    expect(positionalArgs(['node', 'run-all.ts', '--quick', 'codec'])).toEqual(['codec']);
  });
});

describe('timing', () => {
  it('measures milliseconds of async work', async () => {
    const ms = await measure(() => new Promise((resolve) => setTimeout(resolve, 30)));
    expect(ms).toBeGreaterThanOrEqual(25);
    expect(ms).toBeLessThan(2000);
  });

  it('computes medians, rates and ratios', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(perSecond(500, 250)).toBe(2000);
    expect(ratio(30, 10)).toBe(3);
    expect(() => ratio(1, 0)).toThrow(RangeError);
  });
});

describe('commitLags', () => {
  it('is how long ago the fold passed each committed offset still behind its end', () => {
    const positions = new Map([
      [0, [[1_100, 100], [1_200, 200], [1_300, 300]] as const],
      [1, [[1_150, 50]] as const],
    ]);
    const end = new Map([
      [0, 300n],
      [1, 50n],
      [2, 0n], // empty: never lags
    ]);
    const samples = [
      { atMs: 1_250, committed: new Map<number, bigint>() }, // nothing committed: since the first fold (1,000)
      { atMs: 1_400, committed: new Map([[0, 150n], [1, 50n]]) }, // 0 passed 150 at 1,200; 1 is at its end
      { atMs: 1_500, committed: new Map([[0, 300n], [1, 50n]]) }, // both at the end
      { atMs: 5_000, committed: new Map([[0, 100n]]) }, // outside the window
    ];
    expect(commitLags(positions, samples, end, 1_000, 2_000)).toEqual([250, 250, 200]);
    expect(percentile([250, 250, 200], 99)).toBe(250);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50)).toBe(5);
    expect(percentile([], 99)).toBeUndefined();
  });
});

describe('cpu readings (Linux /proc)', () => {
  const linux = process.platform === 'linux' ? it : it.skip;

  linux('threadCpuMs names the main thread and sums the rest by name; threadCpuDelta keeps what grew', () => {
    const before = threadCpuMs(process.pid)!;
    expect(before).toHaveProperty('main');
    let x = 0;
    const until = Date.now() + 30;
    while (Date.now() < until) x++;
    const after = threadCpuMs(process.pid)!;
    expect(x).toBeGreaterThan(0);
    expect(threadCpuDelta({ main: 10, a: 5 }, { main: 30, a: 5, b: 2 })).toEqual({ main: 20, b: 2 });
    expect(threadCpuDelta(undefined, after)).toBeUndefined();
    expect(after.main).toBeGreaterThanOrEqual(before.main!);
  });

  linux('machineBusyMs and processMemoryMb read /proc; a missing process gives undefined', () => {
    expect(machineBusyMs()).toBeGreaterThan(0);
    const memory = processMemoryMb(process.pid)!;
    expect(memory.rss).toBeGreaterThan(0);
    expect(memory.peak).toBeGreaterThanOrEqual(memory.rss);
    expect(processMemoryMb(2 ** 30)).toBeUndefined();
    expect(threadCpuMs(2 ** 30)).toBeUndefined();
  });
});
