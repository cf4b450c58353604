// Summarizes V8 CPU profiles (`node --cpu-prof`, e.g. bench:throughput with BENCH_CPU_PROF=<dir>):
// the top functions by self time, and self time by area (garbage collection, kafkajs, the engine,
// codecs, Temporal, the rest), as shares of the busy time (idle left out).
//   node bin/run-ts.js bench/lib/profile-summary.ts <file.cpuprofile | dir> [--top N] [--from ms] [--to ms]
// A directory summarizes its largest profile (the worker's main thread). --from/--to keep only the
// samples in that window (ms since the profile started), e.g. the fold window of a run.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  totalMs: number;
  idleMs: number;
  busyMs: number;
  top: Array<{ fn: string; where: string; ms: number; share: number }>;
  areas: Array<{ area: string; ms: number; share: number }>;
}

/** Which part of the process a frame belongs to. */
export function areaOf(frame: CallFrame): string {
  const { functionName: fn, url } = frame;
  if (fn === '(garbage collector)') return 'garbage collection';
  if (fn === '(idle)') return 'idle';
  if (fn === '(program)') return 'V8/native (program)';
  if (url.includes('/kafkajs/')) return 'kafkajs';
  if (url.includes('@temporalio') || url.includes('/temporal')) return 'Temporal SDK';
  if (/\/(core\/codec)\//.test(url)) return 'codecs (core/codec)';
  if (/\/flow\//.test(url) && !url.includes('node_modules')) return 'engine (flow/)';
  if (/\/(workers|activities|kafka|persistence)\//.test(url) && !url.includes('node_modules')) return 'runtime (workers/, kafka/, persistence/)';
  if (url.includes('/bench/')) return 'bench flow';
  if (url.startsWith('node:') || url === '') return fn === 'parse' || fn === 'stringify' ? 'JSON (native)' : 'node internals / builtins';
  if (url.includes('node_modules')) return 'other dependencies';
  return 'other';
}

export function summarize(profile: CpuProfile, options: { top?: number; fromMs?: number; toMs?: number } = {}): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  let t = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    t += dt;
    const ms = t / 1000;
    if (options.fromMs !== undefined && ms < options.fromMs) continue;
    if (options.toMs !== undefined && ms > options.toMs) continue;
    // The delta before a sample is the time it stands for (as Chrome's DevTools count it).
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
  }
  const byFn = new Map<string, { fn: string; where: string; us: number }>();
  const byArea = new Map<string, number>();
  let totalUs = 0;
  let idleUs = 0;
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)!.callFrame;
    totalUs += us;
    const area = areaOf(frame);
    if (area === 'idle') {
      idleUs += us;
      continue;
    }
    byArea.set(area, (byArea.get(area) ?? 0) + us);
    const where = frame.url ? `${shortUrl(frame.url)}:${frame.lineNumber + 1}` : '';
    const k = `${frame.functionName}|${where}`;
    const e = byFn.get(k) ?? { fn: frame.functionName || '(anonymous)', where, us: 0 };
    e.us += us;
    byFn.set(k, e);
  }
  const busyUs = totalUs - idleUs;
  const share = (us: number) => Number(((100 * us) / Math.max(1, busyUs)).toFixed(1));
  return {
    totalMs: Math.round(totalUs / 1000),
    idleMs: Math.round(idleUs / 1000),
    busyMs: Math.round(busyUs / 1000),
    top: [...byFn.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, options.top ?? 25)
      .map((e) => ({ fn: e.fn, where: e.where, ms: Math.round(e.us / 1000), share: share(e.us) })),
    areas: [...byArea].sort((a, b) => b[1] - a[1]).map(([area, us]) => ({ area, ms: Math.round(us / 1000), share: share(us) })),
  };
}

function shortUrl(url: string): string {
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) return url.slice(nm + 'node_modules/'.length);
  const file = url.replace(/^file:\/\//, '');
  const root = path.resolve(__dirname, '..', '..');
  return file.startsWith(root) ? path.relative(root, file) : file;
}

function pickFile(arg: string): string {
  if (!statSync(arg).isDirectory()) return arg;
  const files = readdirSync(arg)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => path.join(arg, f));
  if (files.length === 0) throw new Error(`no .cpuprofile in ${arg}`);
  return files.sort((a, b) => statSync(b).size - statSync(a).size)[0]!;
}

if (process.argv[1] === __filename) {
  const args = process.argv.slice(2);
  const opt = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : undefined;
  };
  const target = args.find((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'));
  if (!target) {
    process.stderr.write('usage: profile-summary <file.cpuprofile | dir> [--top N] [--from ms] [--to ms]\n');
    process.exit(2);
  }
  const file = pickFile(target);
  const s = summarize(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, { top: opt('--top'), fromMs: opt('--from'), toMs: opt('--to') });
  process.stdout.write(`${file}: ${s.totalMs} ms sampled, ${s.idleMs} idle, ${s.busyMs} busy\n\nby area (share of busy):\n`);
  for (const a of s.areas) process.stdout.write(`  ${String(a.share).padStart(5)} %  ${String(a.ms).padStart(6)} ms  ${a.area}\n`);
  process.stdout.write('\ntop functions by self time (share of busy):\n');
  for (const f of s.top) process.stdout.write(`  ${String(f.share).padStart(5)} %  ${String(f.ms).padStart(6)} ms  ${f.fn}  ${f.where}\n`);
}
