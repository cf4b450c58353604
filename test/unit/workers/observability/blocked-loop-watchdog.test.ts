// The blocked-loop watchdog in real child processes: a main thread blocked in a native wait (as a
// lock that is never released would) is killed; one that runs, or a process stopped and continued,
// is left alone.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { type ChildEnd, childEnd } from '../../../support/captured-child';

const root = path.resolve(__dirname, '../../../..');
const BLOCKED_MS = 1500;

type Ended = ChildEnd & { ms: number };

/** Runs `body` in a child with the watchdog started (blockedMs 1.5 s unless given, beats every 100 ms). */
function child(body: string, during?: (pid: number) => Promise<void>, blockedMs = BLOCKED_MS): Promise<Ended> {
  const script = `
    require(${JSON.stringify(path.join(root, 'bin/ts-loader.js'))});
    const { startBlockedLoopWatchdog } = require(${JSON.stringify(path.join(root, 'workers/observability/blocked-loop-watchdog.ts'))});
    startBlockedLoopWatchdog({ blockedMs: ${blockedMs}, everyMs: 100, flow: 'test' });
    process.stdout.write('started\\n');
    ${body}
  `;
  const started = Date.now();
  const p = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  p.stdout.once('data', () => {
    void during?.(p.pid!);
  });
  return childEnd(p).then((end) => ({ ...end, ms: Date.now() - started }));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a main thread blocked for good is killed (SIGKILL) with an error line saying where it waits', async () => {
  // Atomics.wait on a value nobody changes: the main thread sleeps in a futex, as on a held lock.
  const ended = await child('setTimeout(() => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0), 200);');
  expect(ended.signal).toBe('SIGKILL');
  const line = JSON.parse(ended.stderr.trim().split('\n').pop()!);
  expect(line).toMatchObject({ level: 60, flow: 'test' });
  expect(line.msg).toContain('has not run');
  expect(line.blockedMs).toBeGreaterThanOrEqual(BLOCKED_MS);
  const main = line.threads.find((t: { tid: number }) => t.tid === line.pid);
  expect(main.wchan).toMatch(/futex/);
}, 30_000);

test('a main thread that keeps running is left alone', async () => {
  const ended = await child('let n = 0; const t = setInterval(() => { if (++n === 40) { clearInterval(t); process.exit(0); } }, 100);');
  expect({ code: ended.code, signal: ended.signal, stderr: ended.stderr }).toEqual({ code: 0, signal: null, stderr: '' });
}, 30_000);

test('a process stopped (SIGSTOP) longer than the limit and continued is not taken for blocked', async () => {
  // Stopped in the middle of 0.6 s of synchronous work (CPU time, which does not pass while
  // stopped): once continued, the main thread finishes that work before it beats again, while the
  // watchdog looks at once — the time the whole process was stopped must not count.
  const blockedMs = 4000;
  const body = `
    setTimeout(() => {
      const cpu = () => { const c = process.cpuUsage(); return c.user + c.system; };
      const until = cpu() + 600_000;
      while (cpu() < until);
      setTimeout(() => process.exit(0), 500);
    }, 100);
  `;
  const ended = await child(
    body,
    async (pid) => {
      await sleep(300); // 0.2 s into the busy work (it starts 0.1 s after the child says it started)
      process.kill(pid, 'SIGSTOP');
      await sleep(2 * blockedMs);
      process.kill(pid, 'SIGCONT');
    },
    blockedMs,
  );
  expect({ code: ended.code, signal: ended.signal, stderr: ended.stderr }).toEqual({ code: 0, signal: null, stderr: '' });
  expect(ended.ms).toBeGreaterThan(2 * blockedMs);
}, 40_000);
