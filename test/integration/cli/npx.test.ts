// `npx kafka-flow-temporal worker <flow>`: npm exec does not pass SIGTERM/SIGINT on (it dies, and
// the `sh -c` it runs the bin through dies with it). The worker must still stop gracefully and
// leave no orphan process behind.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eventually, FlowCluster } from '../orchestration/harness';

const root = path.join(__dirname, '../../..');

/** The processes of a process group (pid, parent, state, command). */
function group(pgid: number): { pid: number; ppid: number; stat: string; args: string }[] {
  let out = '';
  try {
    out = execFileSync('ps', ['-o', 'pid=,ppid=,stat=,args=', '-g', String(pgid)], { encoding: 'utf8' });
  } catch {
    return []; // ps exits 1 when no process matches
  }
  return out
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => {
      const [pid, ppid, stat, ...args] = l.trim().split(/\s+/);
      return { pid: Number(pid), ppid: Number(ppid), stat: stat!, args: args.join(' ') };
    });
}

const gone = (pid: number) => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z'); // exited, not yet reaped
  } catch {
    return true;
  }
};

// SIGTERM goes to the npx process alone (a process manager, `kill <pid>`): npm passes it to its
// `sh -c`, which dies of it, and the worker notices that its parent is gone. SIGINT goes to the
// whole job (Ctrl-C: the terminal signals the foreground process group, so the worker gets it
// directly); a SIGINT to the npx pid alone is held by dash, which waits for its child (README).
const cases = [
  { signal: 'SIGTERM', to: 'npx' },
  { signal: 'SIGINT', to: 'group' },
] as const;

describe('npx kafka-flow-temporal worker', () => {
  for (const { signal, to } of cases) {
    test(`${signal} to ${to === 'npx' ? 'the npx process' : "the npx job's process group (Ctrl-C)"} stops the worker gracefully and leaves no orphan`, async () => {
      const cluster = new FlowCluster(2);
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-npx-'));
      const logFile = path.join(dir, 'worker.log');
      let pgid: number | undefined;
      try {
        await cluster.start();
        await cluster.produce(500);
        const log = fs.openSync(logFile, 'a');
        // Its own process group (as a shell would start a job), so that a signal reaches npx only
        // and everything it started can be found afterwards.
        const npx = spawn('npx', ['kafka-flow-temporal', 'worker', 'test/fixtures/offset-hash-flow.ts'], {
          cwd: root,
          detached: true,
          stdio: ['ignore', log, log],
          env: {
            ...process.env,
            TEST_FLOW_NAME: cluster.names.name,
            TEST_FLOW_GROUP: cluster.names.group,
            TEST_FLOW_TOPIC: cluster.names.topic,
            TEST_PERSIST_EVERY_MS: '1000',
            LOG_LEVEL: 'info',
          },
        });
        fs.closeSync(log);
        pgid = npx.pid!;
        const npxExited = new Promise<void>((resolve) => npx.once('exit', () => resolve()));
        const started = await eventually(
          'the worker started (log line "worker started")',
          () =>
            fs
              .readFileSync(logFile, 'utf8')
              .split('\n')
              .filter((l) => l.startsWith('{'))
              .map((l) => JSON.parse(l))
              .find((l) => l.msg === 'worker started'),
          90_000,
        );
        // The task queue ends in <host>/<pid>-<random>: the worker's pid, which must be a process
        // under npx (npx → sh -c → node), not npx itself.
        const workerPid = Number(/\/(\d+)-[0-9a-f]+$/.exec(started.taskQueue)![1]);
        const tree = group(pgid);
        const worker = tree.find((p) => p.pid === workerPid);
        expect(worker?.args).toMatch(/node .*kafka-flow-temporal worker test\/fixtures\/offset-hash-flow\.ts/);
        expect(workerPid).not.toBe(npx.pid);

        // Running and committing before we stop it.
        await eventually('the input committed', () => cluster.caughtUp(), 60_000);

        process.kill(to === 'npx' ? npx.pid! : -pgid, signal);
        await npxExited;
        const t0 = Date.now();
        await eventually('the worker process exited', () => gone(workerPid), 60_000);
        process.stderr.write(`npx.test: worker exited ${Date.now() - t0} ms after npx (${signal})\n`);
        const lines = fs
          .readFileSync(logFile, 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l));
        // A graceful stop: the worker flushed, committed, left the group.
        expect(lines.map((l) => l.msg)).toContain('stopping: flush, commit, leave the group');
        expect(lines.map((l) => l.msg)).toContain('stopped');
        if (to === 'npx') {
          expect(lines.find((l) => l.msg.startsWith('the parent process is gone'))).toBeDefined();
        }
        // Nothing of the npx job is left.
        await eventually('no process of the npx job left', () => group(pgid!).every((p) => p.stat.startsWith('Z')), 10_000);
        expect(await cluster.caughtUp()).toBe(true);
      } finally {
        if (pgid !== undefined) {
          for (const p of group(pgid)) {
            try {
              process.kill(p.pid, 'SIGKILL');
            } catch {
              // already gone
            }
          }
        }
        await cluster.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }, 240_000);
  }
});
