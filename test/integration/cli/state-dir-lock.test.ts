// A local state directory belongs to one worker process: a second process using it fails fast with
// StateDirLockedError naming the holder; a holder killed with kill -9 leaves no lock behind.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createKafkaClient } from '../../../kafka/client';
import { KafkaSnapshotBackend } from '../../../persistence/kafka/backend';
import { lockStateDir, StateDirLockedError } from '../../../persistence/kafka/state-dir-lock';
import { kafkaBrokers, unique } from '../../support/servers';
import { eventually, FlowCluster } from '../orchestration/harness';

const root = path.join(__dirname, '../../..');
const lockModule = path.join(root, 'persistence/kafka/state-dir-lock.ts');

/** A node process that locks `dir`, prints `locked` (or the error as JSON) and then holds on. */
function locker(dir: string): { child: ChildProcess; out: () => string; exited: Promise<number | null> } {
  const script = `
    const { lockStateDir } = require(${JSON.stringify(lockModule)});
    try {
      lockStateDir(${JSON.stringify(dir)});
      process.stdout.write('locked\\n');
      setInterval(() => {}, 1000);
    } catch (err) {
      process.stdout.write(JSON.stringify({ name: err.name, code: err.code, message: err.message, holder: err.holder }) + '\\n');
      process.exit(3);
    }`;
  const child = spawn(process.execPath, ['--require', require.resolve('tsx/cjs'), '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, out: () => out, exited };
}

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'kft-lock-'));

describe('state directory lock', () => {
  test('a second process gets StateDirLockedError naming the holder; after kill -9 of the holder a new process takes it at once', async () => {
    const dir = tmp();
    const holder = locker(dir);
    try {
      await eventually('the holder locked', () => holder.out().includes('locked'), 20_000);

      const second = locker(dir);
      expect(await second.exited).toBe(3);
      const err = JSON.parse(second.out());
      expect(err).toMatchObject({ name: 'StateDirLockedError', code: 'STATE_DIR_LOCKED', holder: { pid: holder.child.pid, host: os.hostname() } });
      expect(err.message).toContain(`the local state directory ${fs.realpathSync(dir)} is in use by pid ${holder.child.pid} on host ${os.hostname()}`);
      expect(err.message).toContain('give every worker its own KFT_STATE_DIR');

      // This (jest) process too: typed, with the holder.
      let thrown: unknown;
      try {
        lockStateDir(dir);
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(StateDirLockedError);
      expect((thrown as StateDirLockedError).holder?.pid).toBe(holder.child.pid);

      holder.child.kill('SIGKILL');
      await holder.exited;
      const killedAt = Date.now();
      const next = locker(dir);
      await eventually('a new process locked the directory after the kill -9', () => next.out().includes('locked'), 20_000);
      // Node + tsx start-up is most of this; the lock itself is free the moment the holder died.
      expect(Date.now() - killedAt).toBeLessThan(5_000);
      next.child.kill('SIGKILL');
      await next.exited;
    } finally {
      if (holder.child.exitCode === null && holder.child.signalCode === null) holder.child.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test('within one process the lock is counted: the directory is free once every hold (backend) released it', async () => {
    const dir = tmp();
    const otherProcess = async () => {
      const l = locker(dir);
      const code = await Promise.race([l.exited, eventually('locked', () => l.out().includes('locked'), 20_000).then(() => 'locked' as const)]);
      if (l.child.exitCode === null) {
        l.child.kill('SIGKILL');
        await l.exited;
      }
      return code === 'locked' ? 'locked' : JSON.parse(l.out()).code;
    };
    try {
      const a = lockStateDir(dir);
      const b = lockStateDir(path.join(dir, '.'));
      expect(b.file).toBe(a.file);
      expect(JSON.parse(fs.readFileSync(a.file, 'utf8'))).toMatchObject({ pid: process.pid, host: os.hostname() });
      a.release();
      a.release(); // once per hold
      expect(await otherProcess()).toBe('STATE_DIR_LOCKED');
      b.release();
      expect(await otherProcess()).toBe('locked');

      // The Kafka backend holds it from construction until close().
      const backend = new KafkaSnapshotBackend({
        client: createKafkaClient({ brokers: kafkaBrokers, clientId: unique('lock'), logLevel: 'nothing' }),
        flowName: 'lock-test',
        groupId: unique('lock'),
        inputTopic: unique('lock'),
        transactional: true,
        localState: { dir },
      });
      expect(backend.stateDir).toBe(dir);
      expect(await otherProcess()).toBe('STATE_DIR_LOCKED');
      await backend.close();
      expect(await otherProcess()).toBe('locked');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test('workers: a second worker on the same KFT_STATE_DIR exits with one line; after kill -9 of the first a new one starts', async () => {
    const cluster = new FlowCluster(2, { sessionTimeoutMs: 6000 });
    const dir = tmp();
    try {
      await cluster.start();
      await cluster.produce(200);
      const a = cluster.startWorker('a', { KFT_STATE_DIR: dir });
      await eventually('worker a started', () => cluster.log(a).includes('"worker started"'), 60_000);

      const t0 = Date.now();
      const b = cluster.startWorker('b', { KFT_STATE_DIR: dir });
      expect(await b.exited).toBe(1);
      expect(Date.now() - t0).toBeLessThan(20_000);
      const out = cluster.log(b).trim();
      expect(out.split('\n')).toHaveLength(1);
      expect(out).toBe(
        `kafka-flow-temporal: StateDirLockedError: the local state directory ${fs.realpathSync(dir)} is in use by pid ${a.process.pid} on host ${os.hostname()} ` +
          `(since ${JSON.parse(fs.readFileSync(path.join(dir, '.lock'), 'utf8')).since}); each worker process needs its own state directory: ` +
          'give every worker its own KFT_STATE_DIR (or persistence.localState.dir)',
      );

      a.process.kill('SIGKILL');
      await a.exited;
      const c = cluster.startWorker('c', { KFT_STATE_DIR: dir });
      await eventually('worker c started on the same state directory', () => cluster.log(c).includes('"worker started"'), 60_000);
      expect(cluster.log(c)).not.toContain('StateDirLockedError');
      expect(JSON.parse(fs.readFileSync(path.join(dir, '.lock'), 'utf8')).pid).toBe(c.process.pid);
      expect(await cluster.stop(c)).toBe(0);
    } finally {
      await cluster.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});
