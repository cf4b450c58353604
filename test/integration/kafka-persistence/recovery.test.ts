// Recovery on the real broker: fence first, capture the bound (the log end, read_uncommitted),
// read read_committed without a group up to it.
// (6) a takeover aborts the crashed owner's unfinished transaction (same transactional.id) at once;
// (7) recovery waits out an open transaction outside the id lineage, and drains to the
//     read_uncommitted end: snapshots committed above the open transaction are recovered;
// a read that never progresses fails loudly with its diagnosed cause (an outlived transaction;
// truncation, made real by recreating the topic under the read); a slow read that keeps
// progressing outlives many deadlines; a snapshot that does not decode stops the partition, with
// the CorruptSnapshotError naming where it is, at its key's first record (states are decoded when
// first used), and nothing is committed past that record.
import type { Producer, Transaction } from 'kafkajs';
import { Registry } from 'prom-client';
import { Compressor } from '../../../core/codec/compressor';
import { CorruptSnapshotError } from '../../../core/codec/errors';
import { FlowMetrics } from '../../../flow/metrics';
import { PartitionFlow } from '../../../flow/partition-flow';
import { timerPolicy } from '../../../flow/timers';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { PartitionReader } from '../../../kafka/partition-reader';
import { snapshotTransactionalId } from '../../../kafka/transactional-writer';
import { KafkaSnapshotBackend, type KafkaSnapshotBackendOptions } from '../../../persistence/kafka/backend';
import { RecoveryReadStalledError } from '../../../persistence/kafka/errors';
import type { KafkaPartitionPersistence } from '../../../persistence/kafka/kafka-partition-persistence';
import { kafkaScope, type RunningMember, sleep, unique, waitFor } from '../../support/servers';
import { decodedSnapshot, recordingLogger, textCodec } from './harness';

type State = string;

describe('snapshot recovery on the real broker', () => {
  const kafka = kafkaScope('recovery');
  let reader: PartitionReader;
  let input: string;
  let snapshotTopic: string;
  let groupId: string;
  let prefix: string;
  let member: RunningMember;

  beforeEach(async () => {
    reader = new PartitionReader(kafka.client);
    kafka.defer(() => reader.close());
    input = await kafka.topic('input', 1);
    snapshotTopic = kafka.topicName('snapshots');
    groupId = unique('group');
    prefix = unique('app');
    member = await kafka.member({ groupId }, input);
    await member.membership.waitForJoin(30_000);
  });

  function backend(extra: Partial<KafkaSnapshotBackendOptions<State>> = {}): KafkaSnapshotBackend<State> {
    const b = new KafkaSnapshotBackend<State>({ client: kafka.client, flowName: 'f', groupId, inputTopic: input, snapshotTopic, transactionalIdPrefix: prefix, transactional: true, ...extra });
    kafka.defer(() => b.close());
    return b;
  }

  function assign(b: KafkaSnapshotBackend<State>): Promise<KafkaPartitionPersistence<State>> {
    return b.forPartition({ topic: input, partition: 0, generation: () => member.membership.current() });
  }

  async function recoverAll(p: KafkaPartitionPersistence<State>): Promise<Map<string, { state: State; offset: number }>> {
    const found = new Map<string, { state: State; offset: number }>();
    for await (const k of p.recover()) found.set(k.key, decodedSnapshot(k.snapshot!));
    return found;
  }

  async function put(p: KafkaPartitionPersistence<State>, key: string, state: State, offset: number): Promise<void> {
    await p.write({ writes: [{ key, snapshot: { state, offset } }], commitOffset: offset + 1 });
  }

  /** A producer of another transactional.id that opens a transaction on the snapshot partition and leaves it open. */
  async function foreignOpenTransaction(b: KafkaSnapshotBackend<State>, key: string, transactionTimeout: number, transactionalId = unique('foreign')) {
    const producer: Producer = kafka.client.kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1, transactionTimeout });
    await producer.connect();
    kafka.defer(() => producer.disconnect());
    const transaction: Transaction = await producer.transaction();
    await transaction.send({ topic: snapshotTopic, messages: [{ partition: 0, key, value: b.format.encode({ state: `${key}-uncommitted`, offset: 99 }) }] });
    return { producer, transaction };
  }

  const offsets = async () => ({
    logEnd: Number(await reader.logEndOffset(snapshotTopic, 0)),
    lastStable: Number(await reader.lastStableOffset(snapshotTopic, 0)),
  });

  /**
   * The partition once every transaction on it has ended, markers included: a transaction's
   * commit marker is appended by the coordinator after EndTxn has returned, so the log end (and
   * the last stable offset) read right after a put may not include it yet. Only valid while no
   * transaction is left open on purpose.
   */
  async function settledOffsets(): Promise<{ logEnd: number; lastStable: number }> {
    let o = await offsets();
    await waitFor('every transaction on the snapshot partition to have its marker', async () => {
      o = await offsets();
      return o.lastStable === o.logEnd;
    });
    return o;
  }

  it('(6) a takeover aborts the crashed owner\'s unfinished transaction at once (stable transactional.id)', async () => {
    const first = backend();
    await put(await assign(first), 'k', 'committed', 1);
    // The crash: the partition's own id (a previous incarnation of its producer) leaves a
    // transaction open, with a timeout (10 min) no test waits for.
    const crashed = await foreignOpenTransaction(first, 'k', 600_000, snapshotTransactionalId(prefix, 0));
    expect(crashed.producer).toBeDefined();
    const before = await offsets();
    expect(before.lastStable).toBeLessThan(before.logEnd); // pinned by the open transaction

    const takeover = await assign(backend()); // fences first: InitProducerId aborts the open transaction
    const after = await offsets();
    expect(after.lastStable).toBe(after.logEnd); // unpinned right after the fence, not by a timeout
    const recovered = await recoverAll(takeover);
    expect(recovered).toEqual(new Map([['k', { state: 'committed', offset: 1 }]]));
    expect(takeover.lastRecovery).toMatchObject({ waitedForOpenTransactions: false, keys: 1 });
    expect(takeover.lastRecovery!.ms).toBeLessThan(5_000);
    expect(takeover.lastRecovery!.fenceMs).toBeGreaterThan(0);
  });

  it('(7) waits out an open transaction outside the id lineage and drains to the read_uncommitted end', async () => {
    const owner = backend();
    const p = await assign(owner);
    await put(p, 'a', 'a1', 1);
    // Its commit marker must land first, or the last stable offset would stop at 'a' (pending
    // marker) instead of at the open transaction.
    await settledOffsets();
    await foreignOpenTransaction(owner, 'f', 3_000); // times out after 3 s (+ the broker's 2 s abort scan)
    await put(p, 'b', 'b1', 2); // committed ABOVE the open transaction
    const pinned = await offsets();
    expect(pinned.lastStable).toBeLessThan(pinned.logEnd);

    const { lines, logger } = recordingLogger();
    const next = backend({ recoveryStallTimeoutMs: 20_000, stallNoticeEveryMs: 1_000, logger });
    const takeover = await assign(next); // the fence does not reach a foreign id: still pinned
    expect((await offsets()).lastStable).toBe(pinned.lastStable);
    const recovered = await recoverAll(takeover);
    // A read bounded by the last stable offset would have stopped before 'b'; ours waited for the bound.
    expect(recovered).toEqual(
      new Map([
        ['a', { state: 'a1', offset: 1 }],
        ['b', { state: 'b1', offset: 2 }],
      ]),
    );
    expect(takeover.lastRecovery).toMatchObject({ waitedForOpenTransactions: true, lastStableAtStart: String(pinned.lastStable) });
    expect(Number(takeover.lastRecovery!.bound)).toBeGreaterThanOrEqual(pinned.logEnd);
    expect(takeover.lastRecovery!.readMs).toBeGreaterThan(1_000);
    expect(lines.some((l) => l.level === 'warn' && l.msg.includes('waits for open transaction'))).toBe(true);
    expect(lines.some((l) => l.msg.includes('making no progress'))).toBe(true);
  });

  it('fails loudly when an open transaction outlives the stall deadline, naming it', async () => {
    const owner = backend();
    await put(await assign(owner), 'a', 'a1', 1);
    const foreign = await foreignOpenTransaction(owner, 'f', 60_000);
    const { lines, logger } = recordingLogger();
    const takeover = await assign(backend({ recoveryStallTimeoutMs: 1_500, stallNoticeEveryMs: 500, logger }));
    const started = performance.now();
    const error = await recoverAll(takeover).catch((e: unknown) => e);
    await foreign.transaction.abort();
    expect(error).toBeInstanceOf(RecoveryReadStalledError);
    expect(error).toMatchObject({ code: 'RECOVERY_STALLED', cause: 'outlived-transaction', topic: snapshotTopic, partition: 0 });
    expect((error as Error).message).toMatch(/kafka-transactions\.sh/);
    // The leader's view (DescribeProducers) names the foreign producer and where its transaction starts.
    const open = (error as RecoveryReadStalledError).observation.openTransactions ?? [];
    expect(open.length).toBeGreaterThanOrEqual(1);
    expect((error as Error).message).toContain(`abort --topic ${snapshotTopic} --partition 0 --start-offset ${open[0]!.startOffset}`);
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(lines.filter((l) => l.msg.includes('making no progress')).length).toBeGreaterThanOrEqual(1);
  });

  it('diagnoses truncation when the log end regresses under the read (the topic recreated while it waits)', async () => {
    const owner = backend();
    const p = await assign(owner);
    for (let i = 1; i <= 2; i++) await put(p, `k${i}`, `v${i}`, i);
    // How many offsets one put takes (its record(s) and its commit marker), measured on k3.
    const beforeK3 = (await settledOffsets()).logEnd;
    await put(p, 'k3', 'v3', 3);
    const perPut = (await settledOffsets()).logEnd - beforeK3;
    const foreign = await foreignOpenTransaction(owner, 'f', 60_000); // parks the read
    const withForeign = (await offsets()).logEnd; // the foreign record is acknowledged: in the log
    await put(p, 'k4', 'v4', 4);
    // The bound the read will capture is the log end with k4's commit marker, which the
    // coordinator appends after EndTxn returned: wait for it instead of reading the log end once.
    await waitFor("k4's commit marker in the log", async () => (await offsets()).logEnd === withForeign + perPut);
    const bound = (await offsets()).logEnd;

    const takeover = await assign(backend({ recoveryStallTimeoutMs: 4_000, stallNoticeEveryMs: 1_000 }));
    const reading = recoverAll(takeover).catch((e: unknown) => e);
    await sleep(500);
    // The disaster: every record of the partition is gone and its log end starts over at 0.
    await kafka.admin.deleteTopics([snapshotTopic]);
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        await kafka.admin.ensureTopics([{ topic: snapshotTopic, partitions: 1, config: { 'cleanup.policy': 'compact' } }]);
        const described = await kafka.admin.describeTopic(snapshotTopic);
        if (described?.partitions === 1) break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
      await sleep(200);
    }
    const error = await reading;
    await foreign.transaction.abort().catch(() => undefined);
    expect(error).toBeInstanceOf(RecoveryReadStalledError);
    const stalled = error as RecoveryReadStalledError;
    expect(stalled.cause).toBe('truncation');
    expect(stalled.bound).toBe(String(bound));
    expect(Number(stalled.observation.logEnd)).toBeLessThan(bound);
    expect(stalled.message).toMatch(/log end regressed/);
  });

  it('a slow read that keeps progressing outlives many stall deadlines', async () => {
    const owner = backend();
    await put(await assign(owner), 'own', 'v', 1);
    // Six other producers each hold a transaction open on the partition; they commit one by one,
    // 600 ms apart, so the read advances in steps shorter than its 1 s deadline.
    const open = [];
    for (let i = 0; i < 6; i++) open.push(await foreignOpenTransaction(owner, `f${i}`, 60_000));
    const takeover = await assign(backend({ recoveryStallTimeoutMs: 1_000 }));
    const reading = recoverAll(takeover);
    for (const { transaction } of open) {
      await sleep(600);
      await transaction.commit();
    }
    const recovered = await reading;
    expect([...recovered.keys()].sort()).toEqual(['f0', 'f1', 'f2', 'f3', 'f4', 'f5', 'own']);
    expect(recovered.get('f3')).toEqual({ state: 'f3-uncommitted', offset: 99 }); // committed in the end
    expect(takeover.lastRecovery!.readMs).toBeGreaterThan(3_000); // three deadlines and more
    await waitFor('nothing left open', async () => {
      const o = await offsets();
      return o.lastStable === o.logEnd;
    });
  });

  it('a snapshot that does not decode stops the partition at its key\'s first record with CorruptSnapshotError; nothing is committed past it', async () => {
    const owner = backend();
    const first = await assign(owner);
    await put(first, 'good', 'g', 1);
    // A damaged record of 'bad' on the snapshot topic: its envelope starts as ours do, its state is cut off.
    const producer = kafka.client.kafka.producer();
    await producer.connect();
    kafka.defer(() => producer.disconnect());
    const damaged = new Compressor({ compressionThreshold: Number.POSITIVE_INFINITY }).compress(Buffer.from('{"offset":1,"metadata":"","value":"b'));
    const [sent] = await producer.send({ topic: snapshotTopic, messages: [{ partition: 0, key: 'bad', value: damaged }] });
    await settledOffsets();

    const next = await assign(backend());
    const flow = new PartitionFlow<State, string>({
      flow: 'f',
      topic: input,
      partition: 0,
      assignedAt: '2',
      fold: (state, record) => `${state ?? ''}${record.value}`,
      codec: textCodec,
      persistence: next as KafkaPartitionPersistence<State, string>,
      mode: 'snapshots',
      timers: timerPolicy({ persistPeriodically: { fireEvery: 0, persistEvery: 0 } }),
      metrics: FlowMetrics.of(new Registry()),
    });
    expect(await flow.recover()).toBe(2); // recovered, 'bad' not decoded yet
    const message = (offset: number, key: string) => ({ offset: String(offset), key: Buffer.from(key), value: Buffer.from(String(offset)), timestamp: '0' });
    await flow.handleBatch([message(2, 'good'), message(3, 'other')]);
    flow.triggerTimers(Date.now());
    expect(await flow.persist(Date.now(), 'periodic')).toMatchObject({ written: 2, committed: 4 });

    let error: unknown;
    try {
      await flow.handleBatch([message(4, 'good'), message(5, 'bad'), message(6, 'good')]);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(CorruptSnapshotError);
    expect(error).toMatchObject({ code: 'CORRUPT_SNAPSHOT', topic: snapshotTopic, partition: 0, offset: sent!.baseOffset, key: 'bad' });
    expect(flow.failed).toBe(error);
    expect(flow.stateOf('good')).toBe('g24'); // folded up to the bad key's record, not past it
    await expect(flow.persist(Date.now(), 'periodic')).rejects.toBe(error);
    const offsets = new CommittedOffsets(kafka.client);
    kafka.defer(() => offsets.close());
    expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('4'); // a replay starts before the bad key's record

    // What was stored is all still there, the damaged record included: a retry stops at the same place.
    const again = await assign(backend());
    const keys = new Map<string, unknown>();
    for await (const k of again.recover()) keys.set(k.key, k.snapshot?.offset);
    expect(keys).toEqual(new Map([['good', 2], ['other', 3], ['bad', 1]]));
  });
});
