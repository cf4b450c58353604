// The local state store (docs/local-state.md) against a fake snapshot log: a restart reads only
// the records after the checkpoint (none when nothing changed), records of other owners and
// tombstones after it are applied, a checkpoint that cannot be trusted (checksum, digest,
// identity, log start, retention, beyond the log end, unreadable files) means a full restore, and
// every restore equals a full read of the log.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { open } from 'lmdb';
import type { ReadOptions, ReadRecord } from '../../../../kafka/partition-reader';
import type { SentRecords } from '../../../../kafka/errors';
import type { CommitRequest, CommitResult } from '../../../../kafka/transactional-writer';
import { KafkaPartitionPersistence } from '../../../../persistence/kafka/kafka-partition-persistence';
import type { SnapshotTransactions } from '../../../../persistence/kafka/transactional-snapshot-writer';
import { LocalPartitionStore, type LocalStateIdentity, localStatePath } from '../../../../persistence/kafka/local-state';
import { readLocalCheckpoints } from '../../../../persistence/kafka/local-checkpoints';
import { StandbyReplica } from '../../../../persistence/kafka/standby-replica';
import type { SnapshotLogReader } from '../../../../persistence/kafka/recovery';
import { RestoreRound } from '../../../../persistence/kafka/restore-round';
import { snapshotFormat } from '../../../../persistence/kafka/snapshot-format';
import type { Logger } from '../../../../core/logger';

const TOPIC = 'snapshots';
const P = 2;
const format = snapshotFormat<number>();
const identity: LocalStateIdentity = { flow: 'f', groupId: 'g', snapshotTopic: TOPIC, partition: P, transactionalId: 'g-f-snapshot-2' };

/** A snapshot partition: records at offsets, commit markers taking an offset each. */
class FakeLog implements SnapshotLogReader {
  entries: Array<{ offset: number; key: string; value: Buffer | null }> = [];
  next = 0;
  start = 0;
  readCalls: Array<{ from: string; records: number }> = [];
  append(key: string, value: number | null): number {
    const offset = this.next++;
    this.entries.push({ offset, key, value: value === null ? null : format.encode({ state: value, offset: offset }) });
    return offset;
  }
  marker(): void {
    this.next++;
  }
  async logEndOffset() {
    return String(this.next);
  }
  async lastStableOffset() {
    return String(this.next);
  }
  async logStartOffset() {
    return String(this.start);
  }
  async read(o: ReadOptions) {
    const from = Number(o.fromOffset);
    const to = Number(o.toOffset ?? this.next);
    const records: ReadRecord[] = this.entries
      .filter((e) => e.offset >= from && e.offset < to)
      .map((e) => ({ offset: String(e.offset), key: Buffer.from(e.key), value: e.value, timestamp: '0', headers: {} }));
    if (records.length > 0) await o.onRecords(records);
    this.readCalls.push({ from: o.fromOffset, records: records.length });
    return { bound: String(to), records: records.length, fetches: 1 };
  }
}

/** Commits append the records, then a commit marker. */
class LogTransactions implements SnapshotTransactions {
  readonly transactionalId = identity.transactionalId;
  constructor(private readonly log: FakeLog) {}
  async init() {}
  async commit(r: CommitRequest): Promise<CommitResult> {
    if (r.messages.length === 0) return { sent: [] };
    const base = this.log.next;
    for (const m of r.messages) {
      this.log.entries.push({ offset: this.log.next++, key: String(m.key), value: m.value === null ? null : Buffer.from(m.value as Buffer) });
    }
    this.log.marker();
    return { sent: [{ topic: TOPIC, partition: P, baseOffset: String(base), count: r.messages.length }] };
  }
  async close() {}
}

interface Logged {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}
function memoryLogger(lines: Logged[]): Logger {
  const at = (level: string) => (fields: Record<string, unknown> | string, msg?: string) =>
    lines.push(typeof fields === 'string' ? { level, msg: fields, fields: {} } : { level, msg: msg ?? '', fields });
  const l = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), child: () => l } as unknown as Logger;
  return l;
}

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-local-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Caching mode's parts (plain sends, the consumer's commits) instead of a transactional producer. */
type CachingParts = { sender: { send(messages: readonly { key: unknown; value: unknown }[]): Promise<SentRecords[]> } };

function persistence(
  log: FakeLog,
  o: { local?: boolean; now?: () => number; retentionMs?: number; lines?: Logged[]; round?: RestoreRound; id?: LocalStateIdentity; onDemand?: boolean; caching?: CachingParts; transactions?: SnapshotTransactions } = {},
) {
  const mode = o.caching
    ? { mode: 'caching' as const, sender: o.caching.sender as never, committer: { commit: async () => {} } }
    : {
        mode: 'transactional' as const,
        transactions: o.transactions ?? new LogTransactions(log),
        generation: () => ({ generationId: 1, memberId: 'm' }),
        assignedOffset: 0,
        probe: { recordCommitted: async () => true, committedOffset: async () => undefined },
      };
  return new KafkaPartitionPersistence<number>({
    flow: 'f',
    input: { topic: 'in', partition: P },
    snapshotTopic: TOPIC,
    format,
    reader: log,
    recoveryStallTimeoutMs: 1000,
    maxWritesPerBatch: 256,
    ...mode,
    logger: o.lines ? memoryLogger(o.lines) : undefined,
    local:
      o.local === false
        ? undefined
        : {
            store: new LocalPartitionStore(dir, o.id ?? identity),
            deleteRetentionMs: async () => o.retentionMs ?? 86_400_000,
            now: o.now,
            round: o.round,
            onDemand: o.onDemand,
          },
  });
}

async function recoverAll(p: KafkaPartitionPersistence<number>): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for await (const k of p.recover()) if (k.snapshot) out.set(k.key, k.snapshot.state);
  return out;
}

/** The only right answer: a full read of the log without local state. */
async function fullRead(log: FakeLog): Promise<Map<string, number>> {
  return recoverAll(persistence(log, { local: false }));
}

/** Flips a byte near the end of a store's data file: a change after its clean close. */
function damage(file: string): void {
  const bytes = fs.readFileSync(file);
  bytes[bytes.length - 100] = bytes[bytes.length - 100]! ^ 0xff;
  fs.writeFileSync(file, bytes);
}

/** A restore that refuses the store on its file checksum, and still equals a full read. */
async function refusedOnChecksum(log: FakeLog, lines?: Logged[]): Promise<void> {
  const q = persistence(log, { lines });
  expect(await recoverAll(q)).toEqual(await fullRead(log));
  expect(q.lastRecovery?.fullRestoreReason).toMatch(/state file checksum mismatch/);
  await q.close();
}

async function put(p: KafkaPartitionPersistence<number>, kv: Record<string, number | null>, offset = 1) {
  await p.write({
    writes: Object.entries(kv).map(([key, v]) => (v === null ? { key, purge: { offset } } : { key, snapshot: { state: v, offset } })),
    commitOffset: offset,
  });
}

/** A first owner: full restore of what is there, some writes, clean close. */
async function seeded(log: FakeLog, keys = 20) {
  for (let i = 0; i < keys; i++) log.append(`old${i}`, i);
  log.marker();
  const p = persistence(log);
  await recoverAll(p);
  await put(p, { a: 1, b: 2, c: 3 });
  await put(p, { a: 10, old0: null });
  await p.close();
}

describe('restore from local state', () => {
  test('a restart after a clean close reads nothing from the topic and equals a full read', async () => {
    const log = new FakeLog();
    const lines: Logged[] = [];
    const first = persistence(log, { lines });
    await recoverAll(first);
    expect(lines.some((l) => l.msg === `no checkpoint, restoring from the start of ${TOPIC}-${P}`)).toBe(true);
    await put(first, { a: 1, b: 2 });
    await put(first, { a: 3, c: 4 });
    await put(first, { b: null });
    await first.close();

    const again = persistence(log, { lines });
    const state = await recoverAll(again);
    expect(again.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 0, fromLocal: 2, records: 0 });
    expect(state).toEqual(await fullRead(log));
    expect(state).toEqual(new Map([['a', 3], ['c', 4]]));
    expect(lines.some((l) => /^restored snapshots-2: 2 from local state, 0 from the topic, \d+ ms$/.test(l.msg))).toBe(true);
    await again.close();
  });

  test('the local store is checked while the producer fences; the read comes after the fence, and the result equals a full read', async () => {
    const log = new FakeLog();
    await seeded(log);
    // A crashed owner's transaction, left open: the fence aborts it (its marker takes an offset).
    log.append('a', 666);
    let fenced!: () => void;
    const gate = new Promise<void>((resolve) => (fenced = resolve));
    class SlowFence extends LogTransactions {
      override async init() {
        await gate;
        log.marker();
        log.entries = log.entries.filter((e) => e.key !== 'a' || e.offset < log.next - 2); // aborted: never read
      }
    }
    const lines: Logged[] = [];
    const p = persistence(log, { lines, transactions: new SlowFence(log) });
    const readsBefore = log.readCalls.length;
    const fencing = p.fenceNow();
    await new Promise((r) => setTimeout(r, 20));
    expect(lines.filter((l) => l.msg.startsWith('local state of '))).toHaveLength(1);
    expect(log.readCalls).toHaveLength(readsBefore); // nothing of the snapshots read before the fence
    fenced();
    await fencing;
    const state = await recoverAll(p);
    expect(lines.filter((l) => l.msg.startsWith('local state of '))).toHaveLength(1); // loaded once
    expect(p.lastRecovery).toMatchObject({ restore: 'delta' });
    expect(state).toEqual(await fullRead(log));
    expect(state.get('a')).toBe(10);
    await p.close();
  });

  test('records of another owner after the checkpoint: only the delta is read, tombstones delete locally', async () => {
    const log = new FakeLog();
    await seeded(log);
    const end = log.next;
    // Another owner's transactions (e.g. the partition moved away and back).
    log.append('a', 99);
    log.append('old1', null);
    log.append('new', 5);
    log.marker();
    const p = persistence(log);
    const state = await recoverAll(p);
    // The checkpoint is our last commit marker's offset (reading it yields nothing).
    expect(p.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 3, fromOffset: String(end - 1) });
    expect(state).toEqual(await fullRead(log));
    expect(state.get('a')).toBe(99);
    expect(state.has('old1')).toBe(false);
    // Its local copy now includes the delta: the next restart reads nothing.
    await p.close();
    const q = persistence(log);
    expect(await recoverAll(q)).toEqual(await fullRead(log));
    expect(q.lastRecovery?.fromTopic).toBe(0);
    await q.close();
  });

  test('a crash between the Kafka commit and the local write costs only the delta', async () => {
    const log = new FakeLog();
    await seeded(log);
    const p = persistence(log);
    await recoverAll(p);
    await p.localWritesDone();
    // Records landed in the topic whose local write never happened (the process died in between).
    const crashed = persistence(log, { local: false });
    await recoverAll(crashed);
    await put(crashed, { a: 7, z: 26 });
    const q = persistence(log);
    const state = await recoverAll(q);
    expect(q.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 2 });
    expect(state).toEqual(await fullRead(log));
    await q.close();
    await p.close();
  });

  test('records this process did not write between two of its transactions hold the checkpoint; the result stays right', async () => {
    const log = new FakeLog();
    const lines: Logged[] = [];
    const p = persistence(log, { lines });
    await recoverAll(p);
    await put(p, { a: 1 });
    log.append('x', 42); // a foreign writer slips in
    log.append('a', 43);
    log.marker();
    await put(p, { b: 2 });
    await put(p, { a: 5 });
    await p.close();
    expect(lines.some((l) => l.msg.startsWith('local state checkpoint held'))).toBe(true);
    const q = persistence(log);
    const state = await recoverAll(q);
    expect(state).toEqual(await fullRead(log));
    expect(state).toEqual(new Map([['a', 5], ['b', 2], ['x', 42]]));
    expect(q.lastRecovery).toMatchObject({ restore: 'delta', fromOffset: '1' }); // held after the first transaction
    await q.close();
  });

  test('the checkpoint below the log start offset: full restore, saying why', async () => {
    const log = new FakeLog();
    await seeded(log);
    log.start = log.next + 1;
    log.marker();
    log.marker();
    const lines: Logged[] = [];
    const p = persistence(log, { lines });
    const state = await recoverAll(p);
    expect(p.lastRecovery).toMatchObject({ restore: 'full', fromLocal: 0 });
    expect(p.lastRecovery?.fullRestoreReason).toMatch(/below the log start offset/);
    expect(lines.find((l) => l.level === 'warn')?.msg).toMatch(/local state of snapshots-2 discarded: checkpoint \d+ is below the log start offset/);
    expect(state).toEqual(await fullRead(log));
    await p.close();
  });

  test('a checkpoint older than delete.retention.ms: full restore', async () => {
    const log = new FakeLog();
    await seeded(log);
    const p = persistence(log, { retentionMs: 1000, now: () => Date.now() + 5000 });
    await recoverAll(p);
    expect(p.lastRecovery?.restore).toBe('full');
    expect(p.lastRecovery?.fullRestoreReason).toMatch(/delete.retention.ms/);
    await p.close();
  });

  test('a checkpoint beyond the log end (topic recreated): full restore', async () => {
    const log = new FakeLog();
    await seeded(log);
    const fresh = new FakeLog();
    fresh.append('a', 1);
    const p = persistence(fresh);
    expect(await recoverAll(p)).toEqual(new Map([['a', 1]]));
    expect(p.lastRecovery?.fullRestoreReason).toMatch(/beyond the log end/);
    await p.close();
  });

  test('another flow\'s store in the same place: discarded (identity)', async () => {
    const log = new FakeLog();
    await seeded(log);
    const p = persistence(log, { id: { ...identity, transactionalId: 'other-snapshot-2' } });
    // Same path (path uses group, flow, topic, partition), different transactional.id.
    await recoverAll(p);
    expect(p.lastRecovery?.fullRestoreReason).toMatch(/belongs elsewhere: transactionalId/);
    await p.close();
  });

  test('a store changed after a clean close: state file checksum mismatch, full restore', async () => {
    const log = new FakeLog();
    await seeded(log);
    damage(path.join(new LocalPartitionStore(dir, identity).path, 'data.mdb'));
    const lines: Logged[] = [];
    await refusedOnChecksum(log, lines);
    expect(lines.some((l) => l.level === 'warn' && /local state of snapshots-2 discarded: state file checksum mismatch/.test(l.msg))).toBe(true);
  });

  test('the clean marker checksums the file with xxh64; a store closed by an earlier version (SHA-256 marker) is still trusted, and still checked', async () => {
    const log = new FakeLog();
    await seeded(log);
    const store = new LocalPartitionStore(dir, identity);
    const marker = path.join(store.path, 'clean.json');
    expect(Object.keys(JSON.parse(fs.readFileSync(marker, 'utf8')))).toEqual(['xxh64']);
    const file = path.join(store.path, 'data.mdb');
    const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    fs.writeFileSync(marker, JSON.stringify({ sha256: sha256(fs.readFileSync(file)) }));
    const p = persistence(log);
    expect(await recoverAll(p)).toEqual(await fullRead(log));
    expect(p.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 0 });
    await p.close();
    // The same SHA-256 marker over a file changed since: a full restore.
    fs.writeFileSync(marker, JSON.stringify({ sha256: sha256(fs.readFileSync(file)) }));
    damage(file);
    await refusedOnChecksum(log);
  });

  // The tests below tamper after an unclean end (no clean marker): the finer checks decide.
  test('a tampered checkpoint: checksum mismatch, full restore, never wrong state', async () => {
    const log = new FakeLog();
    await seeded(log);
    const store = new LocalPartitionStore(dir, identity);
    fs.rmSync(path.join(store.path, 'clean.json'));
    const env = open({ path: store.path, noSubdir: false, maxDbs: 4, compression: false });
    const meta = env.openDB<Record<string, unknown>, string>({ name: 'meta', encoding: 'msgpack', compression: false });
    const c = meta.get('checkpoint')!;
    await meta.put('checkpoint', { ...c, checkpoint: String(log.next + 100) });
    await env.close();
    log.append('a', 1000);
    const p = persistence(log);
    expect(await recoverAll(p)).toEqual(await fullRead(log));
    expect(p.lastRecovery?.fullRestoreReason).toBe('checkpoint checksum mismatch');
    await p.close();
  });

  test('a changed entry: state digest mismatch, full restore', async () => {
    const log = new FakeLog();
    await seeded(log);
    const store = new LocalPartitionStore(dir, identity);
    fs.rmSync(path.join(store.path, 'clean.json'));
    const env = open({ path: store.path, noSubdir: false, maxDbs: 4, compression: false });
    const entries = env.openDB<Buffer, string>({ name: 'entries', encoding: 'binary', compression: false });
    const v = Buffer.from(entries.get('a')!);
    const forged = Buffer.concat([v.subarray(0, 8), format.encode({ state: 12345, offset: 1 })]);
    await entries.put('a', forged);
    await env.close();
    const p = persistence(log);
    const state = await recoverAll(p);
    expect(p.lastRecovery?.fullRestoreReason).toMatch(/digest mismatch/);
    expect(state.get('a')).toBe(10);
    expect(state).toEqual(await fullRead(log));
    await p.close();
  });

  test('a garbage state file: unreadable, full restore', async () => {
    const log = new FakeLog();
    await seeded(log);
    const store = new LocalPartitionStore(dir, identity);
    fs.rmSync(path.join(store.path, 'clean.json'));
    // LMDB itself would crash on this file (SIGSEGV): the child process that reads it first does.
    fs.writeFileSync(path.join(store.path, 'data.mdb'), Buffer.alloc(64 * 1024, 0xab));
    const p = persistence(log);
    expect(await recoverAll(p)).toEqual(await fullRead(log));
    expect(p.lastRecovery?.restore).toBe('full');
    expect(p.lastRecovery?.fullRestoreReason).toMatch(/fails verification after an unclean shutdown/);
    await p.close();
    // Rebuilt: the next restart is a delta again.
    const q = persistence(log);
    await recoverAll(q);
    expect(q.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 0 });
    await q.close();
  });

  test('one summary line per rebalance for the restores that overlap', async () => {
    const lines: Logged[] = [];
    const round = new RestoreRound('f', memoryLogger(lines), 20);
    const logs = [new FakeLog(), new FakeLog()];
    logs[0]!.append('a', 1);
    logs[1]!.append('b', 2);
    const ps = logs.map((log, i) => {
      const id = { ...identity, partition: i, transactionalId: `t-${i}` };
      return persistence(log, { round, id });
    });
    await Promise.all(ps.map(recoverAll));
    await new Promise((r) => setTimeout(r, 60));
    const summaries = lines.filter((l) => l.msg.startsWith('restored 2 partition(s) of flow f in this rebalance'));
    expect(summaries).toHaveLength(1);
    expect(round.last).toMatchObject({ partitions: 2, full: 2, fromTopic: 2, fromLocal: 0 });
    for (const p of ps) await p.close();
  });
});

describe('standby copies', () => {
  test('started on a partition with records and no local copy: reads it whole, then each round the delta; the owner takes the copy over and restores nothing', async () => {
    const log = new FakeLog();
    for (let i = 0; i < 30; i++) log.append(`k${i % 12}`, i);
    log.append('k3', null);
    log.marker();
    const copy = new StandbyReplica({
      flow: 'f',
      input: { topic: 'in', partition: P },
      snapshotTopic: TOPIC,
      reader: log,
      local: { store: new LocalPartitionStore(dir, identity), deleteRetentionMs: async () => 86_400_000 },
      stallTimeoutMs: 1000,
      everyMs: 20,
      log: memoryLogger([]),
    });
    copy.start();
    const until = async (what: () => boolean) => {
      for (let i = 0; i < 200 && !what(); i++) await new Promise((r) => setTimeout(r, 10));
      expect(what()).toBe(true);
    };
    await until(() => copy.checkpoint === String(log.next));
    log.append('k1', 100);
    log.append('k5', null);
    log.append('new', 7);
    log.marker();
    await until(() => copy.checkpoint === String(log.next));
    // The partition comes here: its owner's restore takes the copy over and reads nothing more.
    const owner = persistence(log);
    const state = await recoverAll(owner);
    expect(owner.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 0, fromLocal: 11 });
    expect(state).toEqual(await fullRead(log));
    await copy.stop();
    await owner.close();
  });
});

describe('keys read on demand (a bounded state cache)', () => {
  /** Every key a full read of the log has, and a few it has not, answered by `has` and `read` as the full read says. */
  async function answersAsFullRead(p: KafkaPartitionPersistence<number>, log: FakeLog): Promise<void> {
    const full = await fullRead(log);
    expect(full.size).toBeGreaterThan(0);
    for (const [key, state] of full) {
      expect([key, p.has!(key)]).toEqual([key, true]);
      expect([key, (await p.read(key))?.snapshot?.state]).toEqual([key, state]);
    }
    for (const key of ['absent', 'old0', 'b']) {
      if (full.has(key)) continue;
      expect([key, p.has!(key)]).toEqual([key, false]);
      expect(await p.read(key)).toBeUndefined();
    }
  }

  test('a restore yields no key and reads none into memory; has/read answer as a full read, before and after each local write lands', async () => {
    const log = new FakeLog();
    await seeded(log);
    const p = persistence(log, { onDemand: true });
    expect(await recoverAll(p)).toEqual(new Map());
    expect(p.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 0, fromLocal: 22, keys: 22 });
    await answersAsFullRead(p, log);
    // Landed in Kafka, its local write queued: answered from the pending changes, then from the store.
    await put(p, { a: 11, q: 17, old2: null });
    await answersAsFullRead(p, log);
    await p.localWritesDone();
    await answersAsFullRead(p, log);
    await p.close();

    // Another owner's records after the checkpoint: the delta goes to the store, nothing to memory.
    log.append('a', 99);
    log.append('old3', null);
    log.append('new', 5);
    log.marker();
    const q = persistence(log, { onDemand: true });
    expect(await recoverAll(q)).toEqual(new Map());
    expect(q.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 3, keys: 22 });
    await answersAsFullRead(q, log);
    await q.close();
    const r = persistence(log, { onDemand: true });
    await recoverAll(r);
    expect(r.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 0, fromLocal: 22 });
    await answersAsFullRead(r, log);
    await r.close();
  });

  test('a full restore (no checkpoint) writes the partition to the store and yields no key', async () => {
    const log = new FakeLog();
    for (let i = 0; i < 50; i++) log.append(`k${i % 30}`, i);
    log.append('k3', null);
    log.marker();
    const p = persistence(log, { onDemand: true });
    expect(await recoverAll(p)).toEqual(new Map());
    expect(p.lastRecovery).toMatchObject({ restore: 'full', keys: 29 });
    await answersAsFullRead(p, log);
    await p.localWritesDone();
    await answersAsFullRead(p, log);
    await p.close();
  });

  test('a crash between the Kafka commit and the local write: the next restore reads the delta and answers as a full read', async () => {
    const log = new FakeLog();
    await seeded(log);
    const crashed = persistence(log, { local: false });
    await recoverAll(crashed);
    await put(crashed, { a: 7, z: 26, old5: null });
    const p = persistence(log, { onDemand: true });
    await recoverAll(p);
    expect(p.lastRecovery?.restore).toBe('delta');
    expect(p.lastRecovery?.fromTopic).toBeGreaterThan(0);
    await answersAsFullRead(p, log);
    await p.close();
  });
});

describe('LocalPartitionStore', () => {
  test('the digest follows puts, overwrites and deletes; the store reloads exactly', async () => {
    const s = new LocalPartitionStore(dir, identity);
    const current = new Map<string, { bytes: Buffer; offset: string }>();
    const write = async (updates: Array<[string, { bytes: Buffer; offset: string } | undefined]>, checkpoint: string) => {
      const prev = new Map(current);
      await s.write(updates, (k) => prev.get(k), checkpoint);
      for (const [k, v] of updates) if (v) current.set(k, v); else current.delete(k);
    };
    await write([['a', { bytes: Buffer.from('1'), offset: '0' }], ['b', { bytes: Buffer.from('2'), offset: '1' }]], '3');
    await write([['a', { bytes: Buffer.from('3'), offset: '3' }], ['b', undefined], ['c', { bytes: Buffer.alloc(0), offset: '4' }]], '6');
    await s.close();
    const again = new LocalPartitionStore(dir, identity);
    const loaded = await again.load();
    expect(loaded.kind).toBe('loaded');
    if (loaded.kind !== 'loaded') return;
    expect(loaded.checkpoint.checkpoint).toBe('6');
    expect([...(loaded.entries ?? [])]).toEqual([...current].sort(([x], [y]) => x.localeCompare(y)));
    await again.close();
  });

  test('readLocalCheckpoints (the assignor\'s hints at start): each store\'s checkpoint, read in a child; damaged or missing stores left out', async () => {
    const stores = [0, 1, 2, 3].map((partition) => new LocalPartitionStore(dir, { ...identity, partition, transactionalId: `t-${partition}` }));
    await stores[0]!.write([['a', { bytes: Buffer.from('1'), offset: '4' }]], () => undefined, '17');
    await stores[1]!.write([['b', { bytes: Buffer.from('2'), offset: '9' }]], () => undefined, '230');
    await stores[3]!.write([['c', { bytes: Buffer.from('3'), offset: '2' }]], () => undefined, '5');
    for (const s of stores) await s.close();
    fs.writeFileSync(path.join(localStatePath(dir, { ...identity, partition: 1 }), 'data.mdb'), 'not an LMDB file');
    const found = await readLocalCheckpoints(dir, { flow: identity.flow, groupId: identity.groupId, snapshotTopic: identity.snapshotTopic }, [0, 1, 2, 3, 4]);
    expect(found).toEqual(new Map([[0, '17'], [3, '5']]));
  });

  test('the start-up child checksums each cleanly closed store for its restore: taken when the file is unchanged since, computed again when it changed', async () => {
    const log = new FakeLog();
    await seeded(log);
    const hints = { flow: identity.flow, groupId: identity.groupId, snapshotTopic: identity.snapshotTopic };
    expect((await readLocalCheckpoints(dir, hints, [P])).has(P)).toBe(true);
    const p = persistence(log);
    expect(await recoverAll(p)).toEqual(await fullRead(log));
    expect(p.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 0 });
    await p.close();
    // Changed after the child read it (and after its clean close): the restore reads the file itself.
    expect((await readLocalCheckpoints(dir, hints, [P])).has(P)).toBe(true);
    damage(path.join(localStatePath(dir, identity), 'data.mdb'));
    await refusedOnChecksum(log);
  });

  test('no store: none', async () => {
    expect((await new LocalPartitionStore(dir, identity).load()).kind).toBe('none');
  });
});

describe('caching mode (plain writes, no commit markers)', () => {
  /** The shared plain producer as the log sees it: each send appends its records, in requests of at most `perRequest`. */
  function sender(log: FakeLog, perRequest = 1000) {
    return {
      async send(messages: readonly { key: unknown; value: unknown }[]): Promise<SentRecords[]> {
        const sent: SentRecords[] = [];
        for (let i = 0; i < messages.length; i += perRequest) {
          const base = log.next;
          const chunk = messages.slice(i, i + perRequest);
          for (const m of chunk) log.entries.push({ offset: log.next++, key: String(m.key), value: m.value === null ? null : Buffer.from(m.value as Buffer) });
          sent.push({ topic: TOPIC, partition: P, baseOffset: String(base), count: chunk.length });
        }
        return sent;
      },
    };
  }
  const caching = (log: FakeLog, o: { perRequest?: number; onDemand?: boolean } = {}) => persistence(log, { onDemand: o.onDemand, caching: { sender: sender(log, o.perRequest) } });

  test('a restart reads only what came after its own records; the checkpoint follows writes sent in several requests', async () => {
    const log = new FakeLog();
    for (let i = 0; i < 10; i++) log.append(`old${i}`, i);
    const p = caching(log, { perRequest: 2 });
    await recoverAll(p);
    await put(p, { a: 1, b: 2, c: 3 }, 5); // two requests in a row
    await put(p, { a: 10, old0: null }, 6);
    await p.close();
    expect(p.localCheckpoint).toBe(String(log.next));
    const again = caching(log);
    const restored = await recoverAll(again);
    expect(again.lastRecovery).toMatchObject({ restore: 'delta', fromTopic: 0 });
    expect(restored).toEqual(await fullRead(log));
    await again.close();
  });

  test('a stale owner\'s late write between two of ours holds the checkpoint; the next restore reads it and equals a full read', async () => {
    const log = new FakeLog();
    const p = caching(log);
    await recoverAll(p);
    await put(p, { a: 1, b: 2 }, 3);
    await p.localWritesDone();
    const held = p.localCheckpoint;
    expect(held).toBe(String(log.next));
    log.append('a', 99); // the stale owner's flush, unfenced in caching mode
    await put(p, { c: 3 }, 4);
    await p.close();
    expect(p.localCheckpoint).toBe(held);
    const again = caching(log);
    const restored = await recoverAll(again);
    expect(again.lastRecovery).toMatchObject({ restore: 'delta' });
    expect(again.lastRecovery!.fromTopic).toBeGreaterThan(0);
    expect(restored).toEqual(await fullRead(log));
    expect(restored.get('a')).toBe(99); // the later record wins, as in the topic
    await again.close();
  });

  test('keys read on demand: a restart yields no key and reads answer as a full read', async () => {
    const log = new FakeLog();
    const p = caching(log, { onDemand: true });
    await recoverAll(p);
    await put(p, { a: 1, b: 2 }, 3);
    await p.localWritesDone();
    await p.close();
    const again = caching(log, { onDemand: true });
    expect((await recoverAll(again)).size).toBe(0);
    expect(again.readNow!('a')?.snapshot?.state).toBe(1);
    expect(again.has!('zzz')).toBe(false);
    await again.close();
  });
});
