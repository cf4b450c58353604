// (8) Group commit on the real broker, through the engine: 600 dirty keys with
// maxWritesPerTransaction 256 take 3 transactions, with 1 take 600, and after every transaction
// the group's committed offset covers only keys whose snapshots are already readable.
import { Registry } from 'prom-client';
import { FlowMetrics } from '../../../flow/metrics';
import { PartitionFlow } from '../../../flow/partition-flow';
import type { InputMessage } from '../../../flow/record';
import { timerPolicy } from '../../../flow/timers';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { PartitionReader } from '../../../kafka/partition-reader';
import type { WriteBatch } from '../../../flow/ports';
import { KafkaSnapshotBackend } from '../../../persistence/kafka/backend';
import { kafkaScope, type RunningMember, unique } from '../../support/servers';
import { snapshotsOf, textCodec } from './harness';

const KEYS = 600;

/** One record per key: key kN at input offset N. */
const oneEach = (n: number): InputMessage[] =>
  Array.from({ length: n }, (_, i) => ({ offset: String(i), key: `k${i}`, value: Buffer.from(`v${i}`), timestamp: '0' }));

describe('group-committed snapshot transactions on the real broker', () => {
  const kafka = kafkaScope('groupcommit');
  let reader: PartitionReader;
  let offsets: CommittedOffsets;
  let input: string;
  let groupId: string;
  let member: RunningMember;

  beforeEach(async () => {
    reader = new PartitionReader(kafka.client);
    kafka.defer(() => reader.close());
    offsets = new CommittedOffsets(kafka.client);
    kafka.defer(() => offsets.close());
    input = await kafka.topic('input', 1);
    groupId = unique('group');
    member = await kafka.member({ groupId }, input);
    await member.membership.waitForJoin(30_000);
  });

  async function flush(snapshotTopic: string, cap: number, check: (batch: WriteBatch<string, string>) => Promise<void>) {
    kafka.deleteAfter(snapshotTopic);
    const backend = new KafkaSnapshotBackend<string, string>({
      client: kafka.client,
      flowName: 'f',
      groupId,
      inputTopic: input,
      snapshotTopic,
      transactionalIdPrefix: unique('app'),
      transactional: true,
      maxWritesPerTransaction: cap,
    });
    try {
      const persistence = await backend.forPartition({ topic: input, partition: 0, generation: () => member.membership.current() });
      const write = persistence.write.bind(persistence);
      persistence.write = async (batch) => {
        const result = await write(batch);
        await check(batch);
        return result;
      };
      const flow = new PartitionFlow<string, string>({
        flow: 'f',
        topic: input,
        partition: 0,
        assignedAt: '0',
        fold: (_s, r) => r.value,
        codec: textCodec,
        persistence,
        mode: 'snapshots',
        timers: timerPolicy({ persistPeriodically: {} }),
        metrics: FlowMetrics.of(new Registry()),
      });
      await flow.recover();
      await flow.handleBatch(oneEach(KEYS));
      const result = await flow.persist(Date.now(), 'shutdown');
      return { result, stats: { ...persistence.stats }, stored: await snapshotsOf(backend), logEnd: Number(await reader.logEndOffset(snapshotTopic, 0)) };
    } finally {
      await backend.close();
    }
  }

  it('600 dirty keys at cap 256: 3 transactions, each committing an offset only its landed writes cover', async () => {
    const checks: Array<{ committed: number; missing: number }> = [];
    const snapshotTopic = unique('snapshots');
    const { result, stats, stored, logEnd } = await flush(snapshotTopic, 256, async () => {
      // Broker truth after each transaction: the committed offset and the readable snapshots.
      const committed = Number((await offsets.fetch(groupId, input, [0])).get(0) ?? 0);
      const visible = new Set<string>();
      await reader.read({
        topic: snapshotTopic,
        partition: 0,
        fromOffset: '0',
        stallTimeoutMs: 20_000,
        onRecords: (rs) => {
          for (const r of rs) visible.add(String(r.key));
        },
      });
      let missing = 0;
      for (let i = 0; i < Math.min(committed, KEYS); i++) if (!visible.has(`k${i}`)) missing++;
      checks.push({ committed, missing });
    });
    expect(stats.transactions).toBe(3);
    expect(checks.map((c) => c.committed)).toEqual([256, 512, 600]);
    expect(checks.every((c) => c.missing === 0)).toBe(true);
    expect(result).toMatchObject({ committed: 600, written: KEYS, failed: 0 });
    expect(stored.size).toBe(KEYS);
    expect(stored.get('k599')).toEqual({ offset: '599', state: 'v599' });
    expect(logEnd).toBe(KEYS + 3); // the records and one commit marker per transaction
  });

  it('600 dirty keys at cap 1: 600 transactions', async () => {
    const { result, stats, stored, logEnd } = await flush(unique('snapshots'), 1, async () => {});
    expect(stats.transactions).toBe(KEYS);
    expect(result).toMatchObject({ committed: 600, written: KEYS });
    expect(stored.size).toBe(KEYS);
    expect(logEnd).toBe(2 * KEYS);
    expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('600');
  });
});
