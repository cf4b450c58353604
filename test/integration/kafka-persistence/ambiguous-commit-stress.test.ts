// The conditions of the chaos run whose Kafka mode lost outputs (seed 28030, issue 28), on the real
// broker: a recovered partition with a backlog, keys folding asynchronously and emitting several
// outputs between their writes, persists of many small transactions running while the fold goes
// on, and every EndTxn(commit) of a stretch cut right after it went out (each settled before the
// next write) — with restarts from the persisted state when a persist stops the partition. Every
// output of the input must be read once (read_committed), and the snapshots must be the plain fold.
import { OUTPUT_SOURCE_HEADER } from '../../../flow/emit';
import type { Fold } from '../../../flow/fold';
import { ManualClock } from '../../../flow/clock';
import { PartitionFlow } from '../../../flow/partition-flow';
import { timerPolicy } from '../../../flow/timers';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { KafkaSnapshotBackend } from '../../../persistence/kafka/backend';
import { isEndTxnCommit } from '../../../chaos/tcp-proxy';
import { kafkaScope, proxiedClient, unique } from '../../support/servers';
import { type Events, readCommitted, snapshotsOf, textCodec } from './harness';

const KEYS = 40;
const RECORDS = 900;
const BATCH = 60;

/** Keys ending in an even digit fold with a Promise (as the chaos flow's 0/3/6/9), the others synchronously; every record emits. */
function stressFold(topic: string): Fold<Events, string> {
  return (state, record, ctx) => {
    const fold = () => {
      ctx.emit({ topic, key: record.key, value: JSON.stringify({ offset: record.offset }) });
      return { events: [...(state?.events ?? []), record.value] };
    };
    if (Number(record.key.slice(1)) % 2 === 1) return fold();
    return new Promise<void>((resolve) => setImmediate(resolve)).then(fold);
  };
}

describe.each([1, 2] as const)('ambiguous commits under load, on the real broker (transaction version %s)', (transactionVersion) => {
  const kafka = kafkaScope('ambiguous-stress');

  it('every output lands once and the snapshots are the plain fold, whatever commits were cut', async () => {
    const input = await kafka.topic('input', 1);
    const output = kafka.topicName('outputs');
    const snapshotTopic = kafka.topicName('snapshots');
    const groupId = unique('group');
    const proxy = await kafka.proxy();
    const m = await kafka.member({ groupId }, input);
    await m.membership.waitForJoin(30_000);
    const backend = new KafkaSnapshotBackend<Events, string>({
      client: proxiedClient(kafka.client, proxy),
      flowName: 'f',
      groupId,
      inputTopic: input,
      snapshotTopic,
      transactional: true,
      transactionalIdPrefix: unique('app'),
      outputTopics: [output],
      maxWritesPerTransaction: 4,
      transactionVersion,
      commitTimeoutMs: 60_000,
    });
    kafka.defer(() => backend.close());

    const records = Array.from({ length: RECORDS }, (_, i) => ({
      offset: String(i),
      key: Buffer.from(`k${(i * 7) % KEYS}`),
      value: Buffer.from(`v${i}`),
      timestamp: '0',
    }));
    const clock = new ManualClock(0);
    let restarts = 0;
    let failures = 0;
    let cuts = 0;
    let position = 0;
    /** The partition recovered from what landed (fenced, then at the group's committed offset). */
    const recoverOnce = async () => {
      const persistence = await backend.forPartition({ topic: input, partition: 0, generation: () => m.membership.current() });
      const flow = new PartitionFlow<Events, string>({
        flow: 'f',
        topic: input,
        partition: 0,
        assignedAt: String(persistence.committedOffset),
        fold: stressFold(output),
        codec: textCodec,
        outputs: { topics: new Set([output]), encoder: { encode: (v) => Buffer.from(String(v)), encodeText: (v) => String(v) } },
        maxPendingOutputs: 64,
        persistence,
        mode: 'snapshots',
        timers: timerPolicy({ persistPeriodically: { fireEvery: 0, persistEvery: 0, flushOnRevoke: true } }),
        clock,
      });
      await flow.recover();
      position = persistence.committedOffset;
      return flow;
    };
    // Retried while the broker is unreachable for a moment, as a partition's recovery is.
    const start = async (): Promise<PartitionFlow<Events, string>> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await recoverOnce();
        } catch (err) {
          if (attempt >= 20) throw err;
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
      }
    };

    let flow = await start();
    let persisting: Promise<unknown> = Promise.resolve();
    for (let round = 0; position < RECORDS && round < 400; round++) {
      // Every third round a stretch of cut commits: the next EndTxn(commit)s are cut after they went out.
      if (round % 3 === 0) {
        for (let i = 0; i < 3; i++) void proxy.arm({ apiKey: 26, action: 'cut', match: isEndTxnCommit }).then(() => cuts++);
      }
      // Every fifth round the cut is followed by a broker refusing connections for a while: the
      // outcome is learned only once it answers again (the settle waits, folding goes on).
      if (round % 5 === 4) {
        void proxy.arm({ apiKey: 26, action: 'cut', match: isEndTxnCommit }).then(() => {
          cuts++;
          proxy.refuse(true);
          setTimeout(() => proxy.refuse(false), 4_000);
        });
      }
      // Every seventh round a restart from the persisted state (a recovery: lazily decoded keys, a backlog).
      if (round % 7 === 6) {
        await persisting.catch(() => undefined);
        restarts++;
        flow = await start();
      }
      const batch = records.slice(position, position + BATCH);
      try {
        const folding = flow.handleBatch(batch);
        // A persist runs while the batch folds (its chunks interleave with the async folds).
        persisting = flow.persist(clock.now(), round % 2 === 0 ? 'periodic' : 'outputs');
        await folding;
        position += batch.length;
        await persisting;
      } catch {
        await persisting.catch(() => undefined);
        failures++;
        restarts++;
        flow = await start(); // the partition stopped: it recovers from what landed
      }
      clock.advance(1);
    }
    // Drain without faults: every armed trigger fires on a harmless probe or stays unused.
    await flow.persist(clock.now(), 'shutdown').catch(async () => {
      restarts++;
      flow = await start();
      await flow.handleBatch(records.slice(position));
      await flow.persist(clock.now(), 'shutdown');
    });
    expect(position).toBe(RECORDS);

    // The snapshots are the plain fold; every record's output is there once.
    const expected = new Map<string, string[]>();
    for (const r of records) expected.set(String(r.key), [...(expected.get(String(r.key)) ?? []), String(r.value)]);
    const snapshots = await snapshotsOf(backend);
    expect(new Map([...snapshots].map(([k, v]) => [k, v.state.events]))).toEqual(expected);
    const sources = (await readCommitted(kafka.client, output)).map((r) => String(r.headers[OUTPUT_SOURCE_HEADER]));
    const counts = new Map<string, number>();
    for (const s of sources) counts.set(s, (counts.get(s) ?? 0) + 1);
    const missing = records.filter((r) => !counts.has(`${input}/0/${r.offset}/0`)).map((r) => r.offset);
    const twice = [...counts].filter(([, n]) => n > 1).map(([s]) => s);
    expect({ missing, twice }).toEqual({ missing: [], twice: [] });
    // The group's offset is stable (no transactional commit left pending) and is the input's end.
    const offsets = new CommittedOffsets(kafka.client);
    try {
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe(String(RECORDS));
    } finally {
      await offsets.close();
    }
    // The run took the paths it is about.
    expect(cuts).toBeGreaterThan(10);
    console.log(`stress: ${cuts} commits cut, ${failures} persists stopped the partition, ${restarts} restarts`);
  }, 300_000);
});
