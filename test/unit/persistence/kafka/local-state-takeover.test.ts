// Two local stores of one partition in one process (two overlapping recoveries: one started at the
// join, the activity's own): the newer takes the path over. Without that, the second store opening
// the LMDB environment while the first has a write in flight blocked the main thread for good — the
// full chaos run's silent workers (docs/experiments/2026-12-05-local-state-hang.md).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { childEnd } from '../../../support/captured-child';
import { LocalPartitionStore, type LocalStateIdentity, LocalStateSupersededError, type LocalUpdate } from '../../../../persistence/kafka/local-state';

const root = path.resolve(__dirname, '../../../..');
const identity: LocalStateIdentity = { flow: 'f', groupId: 'g', snapshotTopic: 'snapshots', partition: 9, transactionalId: 'g-f-snapshot-9' };
const updates = (n: number, keys = 2000): LocalUpdate[] =>
  Array.from({ length: keys }, (_, i) => [`k${i}`, { offset: String(n), bytes: Buffer.alloc(200, n % 256) }] as const);

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-local-takeover-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a second store writing while the first has a write in flight does not block the process (in a child, 60 s at most)', async () => {
  // The overlap of two recoveries of one partition, forty times: the older's restore write is in
  // flight when the newer one (having discarded the store like the older) writes its own.
  const script = `
    require(${JSON.stringify(path.join(root, 'bin/ts-loader.js'))});
    const { LocalPartitionStore } = require(${JSON.stringify(path.join(root, 'persistence/kafka/local-state.ts'))});
    const id = ${JSON.stringify(identity)};
    const updates = (n) => Array.from({ length: 2000 }, (_, i) => ['k' + i, { offset: String(n), bytes: Buffer.alloc(200, n % 256) }]);
    (async () => {
      for (let round = 0; round < 40; round++) {
        const older = new LocalPartitionStore(${JSON.stringify(dir)}, id);
        const newer = new LocalPartitionStore(${JSON.stringify(dir)}, id);
        await older.load();
        await older.discard();
        const inFlight = older.write(updates(1), () => undefined, '1').catch(() => undefined);
        if (round % 4) await new Promise((r) => setTimeout(r, round % 4));
        await newer.write(updates(2), () => undefined, '2');
        await inFlight;
        await older.close();
        await newer.close();
      }
      process.stdout.write('done');
    })().catch((e) => { process.stderr.write(String(e && e.stack || e)); process.exit(1); });
  `;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000); // a hang never ends; a busy machine (unit and integration files in parallel) took over 30 s once
  const ended = await childEnd(child);
  clearTimeout(killer);
  expect(ended).toEqual({ code: 0, signal: null, stdout: 'done', stderr: '' });
}, 70_000);

test('the older store, taken over, refuses everything after its write in flight landed, and leaves the newer one its files', async () => {
  const older = new LocalPartitionStore(dir, identity);
  const newer = new LocalPartitionStore(dir, identity);
  expect((await older.load()).kind).toBe('none');
  const inFlight = older.write(updates(1, 10), () => undefined, '1');
  expect((await newer.load()).kind).toBe('loaded'); // the older's write landed before the newer read
  await inFlight;
  await expect(older.write(updates(3, 10), () => undefined, '3')).rejects.toBeInstanceOf(LocalStateSupersededError);
  await expect(older.load()).rejects.toBeInstanceOf(LocalStateSupersededError);
  await expect(older.discard()).rejects.toBeInstanceOf(LocalStateSupersededError);
  await older.close(); // a no-op: no clean marker over the newer one's open store

  const previous = new Map(updates(1, 10));
  await newer.write(updates(2, 10), (k) => previous.get(k), '2');
  await newer.close();
  const reopened = new LocalPartitionStore(dir, identity);
  const loaded = await reopened.load();
  expect(loaded.kind).toBe('loaded');
  if (loaded.kind !== 'loaded') return;
  expect(loaded.checkpoint.checkpoint).toBe('2');
  expect(loaded.entries?.get('k3')?.offset).toBe('2');
  await reopened.close();
});

test('a store made before the holder (an older recovery that comes late) never takes the path back', async () => {
  const older = new LocalPartitionStore(dir, identity);
  const newer = new LocalPartitionStore(dir, identity);
  expect((await newer.load()).kind).toBe('none');
  await newer.write(updates(2, 10), () => undefined, '2');
  await expect(older.load()).rejects.toBeInstanceOf(LocalStateSupersededError);
  await expect(older.write(updates(1, 10), () => undefined, '1')).rejects.toBeInstanceOf(LocalStateSupersededError);
  const previous = new Map(updates(2, 10));
  await newer.write(updates(3, 10), (k) => previous.get(k), '3');
  await newer.close();
  await older.close();
  const reopened = new LocalPartitionStore(dir, identity);
  const loaded = await reopened.load();
  expect(loaded.kind === 'loaded' && loaded.checkpoint.checkpoint).toBe('3');
  await reopened.close();
});

test('a store whose directory name has a dot (a group or snapshot topic like "com.acme.orders") opens as a directory, not as a file', async () => {
  // lmdb-js takes a path with an extension for a single file unless told otherwise.
  const dotted: LocalStateIdentity = { ...identity, groupId: 'com.acme', snapshotTopic: 'orders.v1-snapshots' };
  const store = new LocalPartitionStore(dir, dotted);
  expect((await store.load()).kind).toBe('none');
  await store.write(updates(1, 3), () => undefined, '4');
  await store.close();
  expect(fs.statSync(store.path).isDirectory()).toBe(true);
  const again = new LocalPartitionStore(dir, dotted);
  const loaded = await again.load();
  expect(loaded.kind).toBe('loaded');
  if (loaded.kind === 'loaded') expect(loaded.entries!.size).toBe(3);
  await again.close();
});
