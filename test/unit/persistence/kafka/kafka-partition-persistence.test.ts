// KafkaPartitionPersistence against recording fakes of the Kafka port (the broker's side is the
// integration suite's job): group commit under the engine, the committed offset never leading its
// writes, every transaction gated (seeded offset), the generation read live per transaction and
// never missing, fences stopping the partition, unanswered commits settled before going on, and
// caching mode's commit-after-writes.
import { Registry } from 'prom-client';
import { ManualClock } from '../../../../flow/clock';
import { FlowMetrics } from '../../../../flow/metrics';
import { PartitionFlow } from '../../../../flow/partition-flow';
import type { InputMessage } from '../../../../flow/record';
import { isLazySnapshot, type RecoveredKey } from '../../../../flow/ports';
import { timerPolicy } from '../../../../flow/timers';
import { SnapshotCommitTimeoutError } from '../../../../kafka/errors';
import type { ReadOptions } from '../../../../kafka/partition-reader';
import type { CommitRequest, CommitResult } from '../../../../kafka/transactional-writer';
import { CommitLandedLateError, SnapshotWriteFencedError } from '../../../../core/fence-errors';
import { EmittedOutputs, type PendingOutput } from '../../../../core/emitted-outputs';
import { jsonCodec } from '../../../../core/codec/json';
import type { OutputTopics } from '../../../../persistence/kafka/dead-letter';
import { MissingGenerationError } from '../../../../persistence/kafka/errors';
import { KafkaPartitionPersistence } from '../../../../persistence/kafka/kafka-partition-persistence';
import type { GenerationSource, OutcomeProbe, SnapshotTransactions, WriteGeneration } from '../../../../persistence/kafka/transactional-snapshot-writer';
import { KafkaPersistenceMetrics } from '../../../../persistence/kafka/metrics';
import type { SnapshotLogReader } from '../../../../persistence/kafka/recovery';
import { snapshotFormat } from '../../../../persistence/kafka/snapshot-format';

const INPUT = { topic: 'input', partition: 3 };
const SNAPSHOTS = 'snapshots';
const format = snapshotFormat<number>();

/** A key read back, its lazy snapshot decoded (a snapshot in this format is always handed over lazily). */
function decoded(found: RecoveredKey<number, unknown> | undefined) {
  if (!found?.snapshot) return found;
  expect(isLazySnapshot(found.snapshot)).toBe(true);
  return { key: found.key, snapshot: { state: found.snapshot.state, offset: found.snapshot.offset } };
}

/** Records every transaction; `next` scripts the outcome of the next commit. */
class FakeTransactions implements SnapshotTransactions {
  readonly transactionalId = 'app-snapshot-3';
  readonly commits: CommitRequest[] = [];
  inits = 0;
  next: Array<(r: CommitRequest) => Promise<CommitResult>> = [];
  initFails: unknown;
  async init() {
    this.inits++;
    if (this.initFails) throw this.initFails;
  }
  async commit(r: CommitRequest): Promise<CommitResult> {
    const scripted = this.next.shift();
    if (scripted) return scripted(r);
    this.commits.push(r);
    return { sent: [] };
  }
  async close() {}
}

const emptyReader: SnapshotLogReader = {
  logEndOffset: async () => '0',
  lastStableOffset: async () => '0',
  logStartOffset: async () => '0',
  read: async (o: ReadOptions) => ({ bound: o.toOffset ?? '0', records: 0, fetches: 0 }),
};

/** Output topics that turn each pending output into one message (the real ones need a broker). */
const fakeOutputTopics = {
  messages: async (outputs: readonly PendingOutput[]) => outputs.map((o) => ({ topic: 'alerts', partition: 0, key: Buffer.from(o instanceof EmittedOutputs ? 'run' : 'letter'), value: null })),
} as unknown as OutputTopics;

/** What every persistence of these tests shares: flow f's input partition, its snapshot topic, nothing to recover. */
const partitionOf = { flow: 'f', input: INPUT, snapshotTopic: SNAPSHOTS, format, reader: emptyReader, recoveryStallTimeoutMs: 1000 };

function transactional(o: { generation?: GenerationSource; cap?: number; seed?: number; probe?: Partial<OutcomeProbe>; outputs?: boolean } = {}) {
  const tx = new FakeTransactions();
  const registry = new Registry();
  let gen: WriteGeneration | undefined = { generationId: 7, memberId: 'member-a' };
  const fences: SnapshotWriteFencedError[] = [];
  const persistence = new KafkaPartitionPersistence<number, string>({
    ...partitionOf,
    maxWritesPerBatch: o.cap ?? 256,
    mode: 'transactional',
    transactions: tx,
    generation: o.generation ?? (() => gen),
    assignedOffset: o.seed ?? 0,
    probe: { recordCommitted: async () => true, committedOffset: async () => undefined, ...o.probe },
    ...(o.outputs ? { outputs: fakeOutputTopics } : {}),
    metrics: KafkaPersistenceMetrics.of(registry),
    onFence: (e) => fences.push(e),
  });
  return { tx, persistence, registry, fences, setGeneration: (g: WriteGeneration | undefined) => { gen = g; } };
}

function engine(persistence: KafkaPartitionPersistence<number, string>, assignedAt = '0', ignorePersistErrors = false, emitting = false) {
  return new PartitionFlow<number, string>({
    flow: 'f',
    topic: INPUT.topic,
    partition: INPUT.partition,
    assignedAt,
    fold: (s, r, ctx) => {
      if (emitting) ctx.emit({ topic: 'alerts', key: r.key, value: r.offset });
      return (s ?? 0) + 1;
    },
    ...(emitting ? { outputs: { topics: new Set(['alerts']), encoder: jsonCodec<unknown>() } } : {}),
    codec: { encode: (s) => Buffer.from(s), decode: (b) => b.toString() },
    persistence,
    mode: 'snapshots',
    timers: timerPolicy({ persistPeriodically: { fireEvery: 0, persistEvery: 0, ignorePersistErrors } }),
    clock: new ManualClock(0),
    metrics: FlowMetrics.of(new Registry()),
  });
}

/** `n` records, one per key k0..k(n-1), at offsets from..from+n-1. */
function oneEach(n: number, from = 0): InputMessage[] {
  return Array.from({ length: n }, (_, i) => ({ offset: String(from + i), key: `k${from + i}`, value: Buffer.from('v'), timestamp: '0' }));
}

describe('transactional mode', () => {
  it('group-commits 600 dirty keys in 3 transactions at cap 256; each offset covers only keys already written', async () => {
    const { tx, persistence } = transactional();
    const flow = engine(persistence);
    await flow.recover();
    await flow.handleBatch(oneEach(600));
    await flow.persist(0, 'shutdown');
    const withWrites = tx.commits.filter((c) => c.messages.length > 0);
    expect(withWrites.map((c) => c.messages.length)).toEqual([256, 256, 88]);
    // key kN holds offset N until written: a transaction may commit offset O only if every key below O is written by then
    const written = new Set<string>();
    for (const c of tx.commits) {
      for (const m of c.messages) written.add(String(m.key));
      const offset = Number(c.offsets[0]!.offset);
      for (let i = 0; i < Math.min(offset, 600); i++) expect(written.has(`k${i}`)).toBe(true);
    }
    expect(tx.commits.map((c) => c.offsets[0]!.offset)).toEqual(['256', '512', '600']);
    expect(persistence.stats).toMatchObject({ transactions: 3, records: 600 });
  });

  it('takes one transaction per key at cap 1', async () => {
    const { tx, persistence } = transactional({ cap: 1 });
    const flow = engine(persistence);
    await flow.recover();
    await flow.handleBatch(oneEach(600));
    await flow.persist(0, 'shutdown');
    expect(tx.commits.filter((c) => c.messages.length > 0)).toHaveLength(600);
    expect(tx.commits.every((c) => c.messages.length <= 1)).toBe(true);
  });

  it('commits an offset in EVERY transaction: the very first write carries the offset seeded at assignment', async () => {
    const { tx, persistence } = transactional({ seed: 40 });
    await persistence.write({ writes: [{ key: 'k', snapshot: { state: 1, offset: 41 } }] });
    expect(tx.commits[0]!.offsets).toEqual([{ topic: 'input', partition: 3, offset: '40' }]);
    await persistence.write({ writes: [], commitOffset: 45 });
    await persistence.write({ writes: [{ key: 'k', snapshot: { state: 2, offset: 46 } }] });
    expect(tx.commits.map((c) => c.offsets[0]!.offset)).toEqual(['40', '45', '45']);
    expect(persistence.committedOffset).toBe(45);
  });

  it('an offset-only commit (e.g. on revoke) is a transaction with no writes', async () => {
    const { tx, persistence } = transactional();
    const result = await persistence.write({ writes: [], commitOffset: 9 });
    expect(result).toEqual({ statuses: [], committed: true, sizes: [] });
    expect(tx.commits).toEqual([{ messages: [], offsets: [{ topic: 'input', partition: 3, offset: '9' }], generation: { generationId: 7, memberId: 'member-a' } }]);
  });

  it('reads the generation live for each transaction, never caching it', async () => {
    const { tx, persistence, setGeneration } = transactional();
    await persistence.write({ writes: [], commitOffset: 1 });
    setGeneration({ generationId: 8, memberId: 'member-a' });
    await persistence.write({ writes: [], commitOffset: 2 });
    expect(tx.commits.map((c) => c.generation.generationId)).toEqual([7, 8]);
  });

  it('fails loudly without a generation instead of committing ungated, and sends nothing', async () => {
    const { tx, persistence, setGeneration } = transactional();
    setGeneration(undefined);
    await expect(persistence.write({ writes: [{ key: 'k', snapshot: { state: 1, offset: 1 } }] })).rejects.toBeInstanceOf(MissingGenerationError);
    setGeneration({ generationId: -1, memberId: '' });
    await expect(persistence.write({ writes: [], commitOffset: 1 })).rejects.toMatchObject({ code: 'NO_GENERATION' });
    expect(tx.commits).toEqual([]);
    // not a fence: the partition can still write once the consumer has joined
    setGeneration({ generationId: 1, memberId: 'm' });
    await persistence.write({ writes: [], commitOffset: 1 });
    expect(tx.commits).toHaveLength(1);
  });

  it('refuses to commit for a partition the live generation no longer assigns to us', async () => {
    const { tx, persistence, setGeneration, fences } = transactional();
    setGeneration({ generationId: 9, memberId: 'member-a', assignment: { input: [0, 1] } });
    await expect(persistence.write({ writes: [], commitOffset: 1 })).rejects.toMatchObject({ code: 'FENCED', reason: 'not-assigned' });
    expect(tx.commits).toEqual([]);
    expect(fences).toHaveLength(1);
  });

  it('a fence stops the partition: typed, counted once, every later write rejected without sending', async () => {
    const { tx, persistence, fences, registry } = transactional();
    const fence = new SnapshotWriteFencedError('input', 3, 'ILLEGAL_GENERATION', { reason: 'generation', transactionalId: tx.transactionalId });
    tx.next.push(async () => {
      throw fence;
    });
    const flow = engine(persistence);
    await flow.recover();
    await flow.handleBatch(oneEach(2));
    flow.triggerTimers(0);
    await expect(flow.persist(0, 'periodic')).rejects.toBe(fence);
    await expect(persistence.write({ writes: [], commitOffset: 5 })).rejects.toBe(fence);
    expect(tx.commits).toEqual([]);
    expect(fences).toEqual([fence]);
    expect(persistence.fenced).toBe(fence);
    expect(await registry.getSingleMetricAsString('kafka_flow_snapshot_fences_total')).toMatch(/reason="generation"} 1/);
    expect(await persistence.read('k0')).toBeUndefined();
  });

  /** One shutdown persist of `keys` keys whose first transaction the group refuses with `type` (`reason`), under `generation`. */
  async function persistRefusedOnce(generation: GenerationSource, type: string, reason: 'generation' | 'producer-epoch', keys = 2) {
    const { tx, persistence, fences } = transactional({ generation });
    const fence = new SnapshotWriteFencedError('input', 3, type, { reason, transactionalId: tx.transactionalId });
    tx.next.push(async () => {
      throw fence;
    });
    const flow = engine(persistence);
    await flow.recover();
    await flow.handleBatch(oneEach(keys));
    const result = await flow.persist(0, 'shutdown');
    return { tx, persistence, fences, fence, result };
  }

  it('cooperative: a commit the group refused because it moved on meanwhile is redone under its next generation when that keeps the partition', async () => {
    let gen: WriteGeneration = { generationId: 7, memberId: 'member-a' };
    const asked: number[] = [];
    const generation = Object.assign(() => gen, {
      next: async (used: WriteGeneration) => {
        asked.push(used.generationId);
        gen = { generationId: 8, memberId: 'member-a' };
        return gen;
      },
    });
    const { tx, persistence, fences } = await persistRefusedOnce(generation, 'ILLEGAL_GENERATION', 'generation');
    expect(asked).toEqual([7]);
    expect(fences).toEqual([]);
    expect(tx.commits.map((c) => [c.generation.generationId, c.messages.length, c.offsets[0]!.offset])).toEqual([[8, 2, '2']]);
    expect(persistence.fenced).toBeUndefined();
  });

  it('cooperative: when the next generation does not keep the partition (or none comes), the refusal stays a fence', async () => {
    const generation = Object.assign(() => ({ generationId: 7, memberId: 'member-a' }), { next: async () => undefined });
    const { tx, fences, fence, result } = await persistRefusedOnce(generation, 'ILLEGAL_GENERATION', 'generation');
    expect(result).toMatchObject({ fenced: true, written: 0 });
    expect(fences).toEqual([fence]);
    expect(tx.commits).toEqual([]);
  });

  it('a producer-epoch fence is never redone, whatever the generation says', async () => {
    const next = jest.fn(async () => ({ generationId: 8, memberId: 'member-a' }));
    const generation = Object.assign(() => ({ generationId: 7, memberId: 'member-a' }), { next });
    const { result } = await persistRefusedOnce(generation, 'INVALID_PRODUCER_EPOCH', 'producer-epoch', 1);
    expect(result).toMatchObject({ fenced: true, written: 0 });
    expect(next).not.toHaveBeenCalled();
  });

  it('an unanswered commit that did commit: the producer is rebuilt, the outcome learned, the write succeeds', async () => {
    const seen: string[] = [];
    const { tx, persistence } = transactional({
      probe: {
        recordCommitted: async (s) => {
          seen.push(`${s.topic}/${s.partition}@${s.baseOffset}`);
          return true;
        },
      },
    });
    tx.next.push(async () => {
      throw new SnapshotCommitTimeoutError(tx.transactionalId, 5, { sent: [{ topic: SNAPSHOTS, partition: 3, baseOffset: '17', count: 1 }] });
    });
    const result = await persistence.write({ writes: [{ key: 'k', snapshot: { state: 4, offset: 9 } }], commitOffset: 10 });
    expect(result).toEqual({ statuses: ['applied'], committed: true, sizes: [expect.any(Number)] });
    expect(tx.inits).toBe(1); // rebuilt before learning
    expect(seen).toEqual(['snapshots/3@17']);
    expect(decoded(await persistence.read('k'))).toEqual({ key: 'k', snapshot: { state: 4, offset: 9 } });
    expect(persistence.committedOffset).toBe(10);
    expect(persistence.stats.commitTimeouts).toBe(1);
  });

  it('an unanswered commit that was aborted fails the write; with ignorePersistErrors the key keeps holding its old offset', async () => {
    const { tx, persistence } = transactional({ probe: { recordCommitted: async () => false } });
    const flow = engine(persistence, '0', true);
    await flow.recover();
    await flow.handleBatch(oneEach(1));
    tx.next.push(async () => {
      throw new SnapshotCommitTimeoutError(tx.transactionalId, 5, { sent: [{ topic: SNAPSHOTS, partition: 3, baseOffset: '0', count: 1 }] });
    });
    flow.triggerTimers(0);
    const result = await flow.persist(0, 'periodic');
    expect(result).toMatchObject({ written: 0, failed: 1, fenced: false });
    expect(flow.holdingOf('k0')).toBe(0);
    expect(flow.committedOffset).toBe(0);
    expect(await persistence.read('k0')).toBeUndefined();
    // the partition goes on: the next persist writes the key
    await flow.persist(0, 'shutdown');
    expect(tx.commits.at(-1)!.messages.map((m) => m.key)).toEqual(['k0']);
  });

  it('learns the outcome of an offset-only commit from the committed offset; an unknown outcome is learned before the next write', async () => {
    let committed: number | undefined = 12;
    let probeFails = true;
    const { tx, persistence } = transactional({
      probe: {
        committedOffset: async () => {
          if (probeFails) throw new Error('coordinator unavailable');
          return committed;
        },
      },
    });
    tx.next.push(async () => {
      throw new SnapshotCommitTimeoutError(tx.transactionalId, 5);
    });
    await expect(persistence.write({ writes: [], commitOffset: 12 })).rejects.toThrow('coordinator unavailable');
    probeFails = false;
    committed = 12;
    await persistence.write({ writes: [], commitOffset: 13 });
    expect(tx.inits).toBe(2); // once at the timeout, once more before the next write went on
    expect(tx.commits.map((c) => c.offsets[0]!.offset)).toEqual(['13']);
    expect(persistence.stats.commitTimeouts).toBe(1);
  });

  /** A write with a dead letter whose commit goes unanswered, and whose outcome cannot be learned at once (the rebuilt producer cannot connect). */
  async function unansweredThenUnreachable(tx: FakeTransactions, persistence: KafkaPartitionPersistence<number, string>) {
    const letter = { topic: 'dead', key: Buffer.from('k'), value: Buffer.from('x'), headers: {} };
    tx.next.push(async () => {
      throw new SnapshotCommitTimeoutError(tx.transactionalId, 5, { sent: [{ topic: SNAPSHOTS, partition: 3, baseOffset: '17', count: 1 }] });
    });
    tx.initFails = new Error('broker unreachable');
    await expect(persistence.write({ writes: [{ key: 'k', snapshot: { state: 1, offset: 4 }, outputs: [letter] }], commitOffset: 5 })).rejects.toThrow('broker unreachable');
    tx.initFails = undefined;
    return letter;
  }

  it('an unanswered commit with outputs, learned committed only at the next write: that write sends nothing and the partition must recover', async () => {
    const { tx, persistence } = transactional({ outputs: true, probe: { recordCommitted: async () => true } });
    const letter = await unansweredThenUnreachable(tx, persistence);
    // The engine handed the key back, its dead letter with it: written again, it would land twice.
    const error = await persistence.write({ writes: [{ key: 'k', snapshot: { state: 2, offset: 6 }, outputs: [letter] }], commitOffset: 7 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommitLandedLateError);
    expect(error).toMatchObject({ code: 'COMMIT_LANDED_LATE', offset: 5, outputs: 1 });
    await expect(persistence.write({ writes: [], commitOffset: 7 })).rejects.toBe(error); // and every later write
    expect(tx.commits).toEqual([]); // nothing of the later writes went out
    expect(persistence.committedOffset).toBe(5); // what landed is known
    expect(decoded(await persistence.read('k'))).toEqual({ key: 'k', snapshot: { state: 1, offset: 4 } });
  });

  it('an unanswered commit with outputs, learned aborted at the next write: that write goes on and carries them once', async () => {
    const { tx, persistence } = transactional({ outputs: true, probe: { recordCommitted: async () => false } });
    const letter = await unansweredThenUnreachable(tx, persistence);
    expect(await persistence.write({ writes: [{ key: 'k', snapshot: { state: 2, offset: 6 }, outputs: [letter] }], commitOffset: 7 })).toEqual({ statuses: ['applied'], committed: true, sizes: [expect.any(Number)] });
    expect(tx.commits.map((c) => c.messages.filter((m) => m.topic === 'alerts').length)).toEqual([1]);
  });

  it('with ignorePersistErrors, a commit that landed late stops the partition anyway: its emitted outputs are not produced twice', async () => {
    let landed = false;
    const { tx, persistence } = transactional({ outputs: true, probe: { recordCommitted: async () => landed } });
    const flow = engine(persistence, '0', true, true);
    await flow.recover();
    await flow.handleBatch(oneEach(2));
    tx.next.push(async () => {
      throw new SnapshotCommitTimeoutError(tx.transactionalId, 5, { sent: [{ topic: SNAPSHOTS, partition: 3, baseOffset: '0', count: 2 }] });
    });
    tx.initFails = new Error('broker unreachable');
    flow.triggerTimers(0);
    // ignorePersistErrors: the failure is logged, the keys keep their outputs for the next persist
    expect(await flow.persist(0, 'periodic')).toMatchObject({ written: 0, failed: 2, fenced: false });
    expect(flow.pendingOutputs).toBe(2);
    tx.initFails = undefined;
    landed = true; // the broker had committed it after all
    await flow.handleBatch(oneEach(1, 2));
    flow.triggerTimers(0);
    await expect(flow.persist(0, 'periodic')).rejects.toBeInstanceOf(CommitLandedLateError);
    expect(tx.commits.flatMap((c) => c.messages.filter((m) => m.topic === 'alerts'))).toEqual([]);
    expect(flow.committedOffset).toBe(0);
  });

  it('a commit whose connection was lost after EndTxn went out is settled like a timeout: landed, its outputs are not handed back', async () => {
    const probed: string[] = [];
    const { tx, persistence } = transactional({
      outputs: true,
      probe: {
        recordCommitted: async (s) => {
          probed.push(`${s.topic}/${s.partition}@${s.baseOffset}`);
          return true;
        },
      },
    });
    const flow = engine(persistence, '0', true, true);
    await flow.recover();
    await flow.handleBatch(oneEach(2));
    const cut = Object.assign(new Error('Closed connection'), { name: 'KafkaJSConnectionClosedError' });
    tx.next.push(async () => {
      throw new SnapshotCommitTimeoutError(tx.transactionalId, undefined, { cause: cut, sent: [{ topic: SNAPSHOTS, partition: 3, baseOffset: '0', count: 2 }, { topic: 'alerts', partition: 0, baseOffset: '40', count: 2 }] });
    });
    flow.triggerTimers(0);
    expect(await flow.persist(0, 'periodic')).toMatchObject({ written: 2, failed: 0, outputs: 2 });
    expect(flow.pendingOutputs).toBe(0);
    expect(probed).toEqual(['snapshots/3@0']); // the snapshot record is the witness when there is one
    expect(flow.committedOffset).toBe(2);
    await flow.handleBatch(oneEach(1, 2));
    await flow.persist(0, 'shutdown');
    expect(tx.commits.flatMap((c) => c.messages.filter((m) => m.topic === 'alerts'))).toHaveLength(1); // only the new record's
  });

  it('a transaction that sent records but none to its snapshot partition is settled by reading back one of them', async () => {
    const probed: string[] = [];
    const { tx, persistence } = transactional({
      probe: {
        recordCommitted: async (s) => {
          probed.push(`${s.topic}/${s.partition}@${s.baseOffset}`);
          return false;
        },
        committedOffset: async () => {
          throw new Error('not asked: a record tells');
        },
      },
    });
    tx.next.push(async () => {
      throw new SnapshotCommitTimeoutError(tx.transactionalId, undefined, { sent: [{ topic: 'alerts', partition: 1, baseOffset: '8', count: 1 }] });
    });
    await expect(persistence.write({ writes: [], commitOffset: 4 })).rejects.toBeInstanceOf(SnapshotCommitTimeoutError);
    expect(probed).toEqual(['alerts/1@8']);
    expect(persistence.committedOffset).toBe(0); // learned aborted
  });

  it('while the outcome cannot be learned, every write fails before sending anything', async () => {
    const { tx, persistence } = transactional({ outputs: true, probe: { recordCommitted: async () => false } });
    const letter = await unansweredThenUnreachable(tx, persistence);
    tx.initFails = new Error('broker still unreachable');
    for (let i = 0; i < 3; i++) {
      await expect(persistence.write({ writes: [{ key: 'k', snapshot: { state: 2, offset: 6 }, outputs: [letter] }], commitOffset: 7 })).rejects.toThrow('broker still unreachable');
    }
    expect(tx.commits).toEqual([]);
    tx.initFails = undefined;
    await persistence.write({ writes: [{ key: 'k', snapshot: { state: 2, offset: 6 }, outputs: [letter] }], commitOffset: 7 });
    expect(tx.commits).toHaveLength(1); // learned aborted: written now, once
  });

  it('a commit that landed late counts the outputs it carried, not those its key emitted since', async () => {
    const { tx, persistence } = transactional({ outputs: true, probe: { recordCommitted: async () => true } });
    const flow = engine(persistence, '0', true, true);
    await flow.recover();
    const sameKey = (offset: number): InputMessage => ({ offset: String(offset), key: 'k', value: Buffer.from('v'), timestamp: '0' });
    await flow.handleBatch([sameKey(0)]);
    tx.next.push(async () => {
      throw new SnapshotCommitTimeoutError(tx.transactionalId, undefined, { sent: [{ topic: SNAPSHOTS, partition: 3, baseOffset: '0', count: 1 }] });
    });
    tx.initFails = new Error('broker unreachable');
    flow.triggerTimers(0);
    expect(await flow.persist(0, 'periodic')).toMatchObject({ written: 0, failed: 1 });
    tx.initFails = undefined;
    await flow.handleBatch([sameKey(1), sameKey(2)]); // k's pending outputs: the handed-back one and two more
    expect(flow.pendingOutputs).toBe(3);
    flow.triggerTimers(0);
    await expect(flow.persist(0, 'periodic')).rejects.toMatchObject({ code: 'COMMIT_LANDED_LATE', offset: 1, outputs: 1 });
  });

  it('a fence while rebuilding after a timeout stops the partition', async () => {
    const { tx, persistence } = transactional();
    tx.next.push(async () => {
      throw new SnapshotCommitTimeoutError(tx.transactionalId, 5);
    });
    tx.initFails = new SnapshotWriteFencedError('input', 3, 'INVALID_PRODUCER_EPOCH', { reason: 'producer-epoch' });
    await expect(persistence.write({ writes: [], commitOffset: 3 })).rejects.toMatchObject({ code: 'FENCED', reason: 'producer-epoch' });
    expect(persistence.fenced).toBeDefined();
  });
});

describe('caching mode', () => {
  function caching(commit: (offset: number) => Promise<void>) {
    const sent: unknown[][] = [];
    const order: string[] = [];
    const persistence = new KafkaPartitionPersistence<number, string>({
      ...partitionOf,
      maxWritesPerBatch: 4096,
      mode: 'caching',
      sender: {
        send: async (messages) => {
          order.push('send');
          sent.push(messages.map((m) => m.key));
          return [];
        },
      },
      committer: {
        commit: async (_tp, offset) => {
          order.push(`commit ${offset}`);
          await commit(offset);
        },
      },
    });
    return { persistence, sent, order };
  }

  it('commits the offset after the writes it covers, with the consumer\'s committer', async () => {
    const { persistence, order, sent } = caching(async () => {});
    const result = await persistence.write({ writes: [{ key: 'a', snapshot: { state: 1, offset: 1 } }, { key: 'b', delete: { offset: 2 } }], commitOffset: 3 });
    expect(result).toEqual({ statuses: ['applied', 'applied'], committed: true, sizes: [expect.any(Number), expect.any(Number)] });
    // Each write's stored size is its record's, as sent.
    expect(result.sizes).toEqual([(await persistence.read('a'))?.size, (await persistence.read('b'))?.size]);
    expect(order).toEqual(['send', 'commit 3']);
    expect(sent).toEqual([['a', 'b']]);
    expect(decoded(await persistence.read('a'))).toEqual({ key: 'a', snapshot: { state: 1, offset: 1 } });
  });

  it('a refused commit (stale generation) is a fence; the writes already landed (this mode does not protect them)', async () => {
    const illegal = Object.assign(new Error('The provided generation id is not the current generation'), { name: 'KafkaJSProtocolError', type: 'ILLEGAL_GENERATION', code: 22 });
    const { persistence } = caching(async () => {
      throw illegal;
    });
    const result = await persistence.write({ writes: [{ key: 'a', snapshot: { state: 1, offset: 1 } }], commitOffset: 2 });
    expect(result.statuses).toEqual(['applied']);
    expect(result.committed).toBe(false);
    expect(result.commitError).toMatchObject({ code: 'FENCED', reason: 'generation', cause: illegal });
    await expect(persistence.write({ writes: [], commitOffset: 2 })).rejects.toMatchObject({ code: 'FENCED' });
  });
});
