/**
 * A worker whose main thread is blocked for good (a native call that never returns) answers
 * nothing: not its consumer group, not Temporal, not SIGTERM — and a graceful stop's own deadline
 * is a timer on that same thread. The process looks alive to a supervisor while it folds nothing.
 *
 * This watchdog runs in a thread of its own: the main thread counts a beat every second into shared
 * memory; when the count has not moved for `blockedMs`, the watchdog writes one error line to stderr
 * (how long, and each thread's kernel wait channel and system call from /proc, to say where it is
 * stuck) and kills the process with SIGKILL. A supervisor restarts it, and the library handles
 * that as any crash: the committed offset and the persisted state are where a kill -9 leaves them.
 */
import { Worker } from 'node:worker_threads';

export interface BlockedLoopWatchdog {
  stop(): Promise<void>;
}

export interface BlockedLoopWatchdogOptions {
  /** Kill the process once the main thread has not run for this long. */
  readonly blockedMs: number;
  /** How often the main thread beats and the watchdog looks (default 1 s). */
  readonly everyMs?: number;
  /** Names the process in the error line (the flow). */
  readonly flow?: string;
}

// The watchdog thread's code: plain JavaScript, so it runs without this project's TypeScript loader.
const WATCHDOG = `
const { workerData } = require('node:worker_threads');
const fs = require('node:fs');
const { beats, blockedMs, everyMs, flow } = workerData;
const counter = new Int32Array(beats);
let last = Atomics.load(counter, 0);
let lastMoved = Date.now();
function threads() {
  const out = [];
  try {
    for (const tid of fs.readdirSync('/proc/self/task')) {
      const read = (f) => { try { return fs.readFileSync('/proc/self/task/' + tid + '/' + f, 'utf8').trim(); } catch { return undefined; } };
      out.push({ tid: Number(tid), name: read('comm'), wchan: read('wchan'), syscall: read('syscall')?.split(' ')[0] });
    }
  } catch {}
  return out;
}
let lastTick = Date.now();
setInterval(() => {
  const now = Date.now();
  // This thread did not run either (the process was stopped, the machine suspended): not a block.
  const paused = now - lastTick > everyMs * 5 + 1000;
  lastTick = now;
  const beat = Atomics.load(counter, 0);
  if (beat !== last || paused) { last = beat; lastMoved = now; return; }
  if (now - lastMoved < blockedMs) return;
  const line = { level: 60, time: now, pid: process.pid, flow, blockedMs: now - lastMoved, threads: threads(),
    msg: 'the main thread has not run for ' + Math.round((now - lastMoved) / 1000) + ' s (blocked in a native call): the worker kills itself (SIGKILL) so that its supervisor restarts it; KFT_BLOCKED_EXIT_MS sets the limit' };
  try { fs.writeSync(2, JSON.stringify(line) + '\\n'); } catch {}
  process.kill(process.pid, 'SIGKILL');
}, everyMs);
`;

/**
 * Starts the watchdog. It does not keep the process alive, and a process stopped (SIGSTOP) or a
 * machine suspended is not a blocked main thread: the time this thread did not run either does not count.
 */
export function startBlockedLoopWatchdog(o: BlockedLoopWatchdogOptions): BlockedLoopWatchdog {
  const everyMs = o.everyMs ?? 1000;
  const beats = new SharedArrayBuffer(4);
  const counter = new Int32Array(beats);
  const beat = setInterval(() => Atomics.add(counter, 0, 1), everyMs);
  beat.unref();
  const worker = new Worker(WATCHDOG, { eval: true, workerData: { beats, blockedMs: o.blockedMs, everyMs, flow: o.flow } });
  worker.unref();
  return {
    async stop() {
      clearInterval(beat);
      await worker.terminate();
    },
  };
}
