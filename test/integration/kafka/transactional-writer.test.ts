// The transactional writer on the real broker, on both transaction protocols (version 2, KIP-890
// part 2, which this broker finalizes and 'auto' picks; and the classic one): both fences
// (consumer generation, producer epoch) reject a stale write with a typed SnapshotWriteFencedError
// and leave nothing visible, back-to-back transactions that start with sendOffsets all succeed
// (CONCURRENT_TRANSACTIONS retried), and an EndTxn whose answer is cut off is reported as an
// unknown outcome, not as a failure.
import type { KafkaClient } from '../../../kafka/client';
import { CommittedOffsets } from '../../../kafka/committed-offsets';
import { SnapshotCommitTimeoutError, SnapshotWriteFencedError } from '../../../kafka/errors';
import { PartitionReader, type ReadRecord } from '../../../kafka/partition-reader';
import { TransactionalWriter, type TransactionVersion } from '../../../kafka/transactional-writer';
import { isEndTxnCommit } from '../../../chaos/tcp-proxy';
import { closeAll, fillInput, kafkaScope, kafkaProxy, proxiedClient, type RunningMember, startMember, unique, waitFor } from '../../support/servers';

async function readAll(client: KafkaClient, topic: string): Promise<string[]> {
  const reader = new PartitionReader(client);
  try {
    const values: string[] = [];
    await reader.read({
      topic,
      partition: 0,
      fromOffset: '0',
      stallTimeoutMs: 20_000,
      onRecords: (records: ReadRecord[]) => {
        for (const r of records) values.push(String(r.value));
      },
    });
    return values;
  } finally {
    await reader.close();
  }
}

describe.each<[string, TransactionVersion | undefined, 1 | 2]>([
  ['transaction version 2 (auto, the default)', undefined, 2],
  ['the classic transaction protocol (1)', 1, 1],
])('TransactionalWriter on the real broker, %s', (_, transactionVersion, expectedVersion) => {
  const kafka = kafkaScope('writer');
  let input: string;
  let snapshots: string;

  beforeEach(async () => {
    input = await kafka.topic('input', 2);
    snapshots = await kafka.topic('snapshots', 2, { 'cleanup.policy': 'compact' });
    await fillInput(kafka.client, input, [0, 1], 50);
  });

  it('fences a stale consumer generation: typed error, aborted, nothing visible', async () => {
    const groupId = unique('group');
    const writer = new TransactionalWriter({ client: kafka.client, transactionalIdPrefix: unique('app'), partition: 0, groupId, transactionVersion });
    const offsets = new CommittedOffsets(kafka.client);
    let first: RunningMember | undefined;
    let second: RunningMember | undefined;
    try {
      first = await startMember(kafka.client, { groupId }, input);
      const gen1 = await first.membership.waitForJoin(30_000);

      await writer.commit({
        messages: [{ topic: snapshots, partition: 0, key: 'k', value: 'v1' }],
        offsets: [{ topic: input, partition: 0, offset: '10' }],
        generation: gen1,
      });
      expect(writer.transactionVersion()).toBe(expectedVersion);

      // A real second member joins: the group moves to a new generation.
      second = await startMember(kafka.client, { groupId }, input);
      const firstMember = first;
      await second.membership.waitForJoin(30_000, gen1.generationId);
      await waitFor('the first member to rejoin', () => (firstMember.membership.current()?.generationId ?? 0) > gen1.generationId);

      const stale = writer.commit({
        messages: [{ topic: snapshots, partition: 0, key: 'k', value: 'v2-stale' }],
        offsets: [{ topic: input, partition: 0, offset: '20' }],
        generation: gen1,
      });
      await expect(stale).rejects.toBeInstanceOf(SnapshotWriteFencedError);
      await expect(stale).rejects.toMatchObject({ code: 'FENCED', reason: 'generation', topic: input, partition: 0 });

      expect(await readAll(kafka.client, snapshots)).toEqual(['v1']);
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('10');

      // An unknown member with the current generation is fenced too.
      const current = second.membership.current()!;
      await expect(
        writer.commit({
          messages: [{ topic: snapshots, partition: 0, key: 'k', value: 'v3-unknown-member' }],
          offsets: [{ topic: input, partition: 0, offset: '30' }],
          generation: { generationId: current.generationId, memberId: 'nobody' },
        }),
      ).rejects.toMatchObject({ code: 'FENCED', reason: 'member' });

      // The current generation still commits (with a fresh producer: the fenced one was discarded).
      await writer.commit({
        messages: [{ topic: snapshots, partition: 0, key: 'k', value: 'v4' }],
        offsets: [{ topic: input, partition: 0, offset: '40' }],
        generation: current,
      });
      expect(writer.producersCreated).toBe(3);
      expect(await readAll(kafka.client, snapshots)).toEqual(['v1', 'v4']);
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('40');
    } finally {
      await closeAll(
        () => writer.close(),
        () => offsets.close(),
        async () => second?.consumer.disconnect(),
        async () => first?.consumer.disconnect(),
      );
    }
  });

  it('fences a stale producer epoch: a second writer with the same transactional.id wins', async () => {
    const groupId = unique('group');
    const prefix = unique('app');
    const old = new TransactionalWriter({ client: kafka.client, transactionalIdPrefix: prefix, partition: 1, groupId, transactionVersion });
    const taker = new TransactionalWriter({ client: kafka.client, transactionalIdPrefix: prefix, partition: 1, groupId, transactionVersion });
    const offsets = new CommittedOffsets(kafka.client);
    let member: RunningMember | undefined;
    try {
      member = await startMember(kafka.client, { groupId }, input);
      const generation = await member.membership.waitForJoin(30_000);
      expect(old.transactionalId).toBe(`${prefix}-snapshot-1`);

      await old.commit({
        messages: [{ topic: snapshots, partition: 1, key: 'k', value: 'old-1' }],
        offsets: [{ topic: input, partition: 1, offset: '5' }],
        generation,
      });
      await taker.commit({
        messages: [{ topic: snapshots, partition: 1, key: 'k', value: 'new-1' }],
        offsets: [{ topic: input, partition: 1, offset: '6' }],
        generation,
      });
      await expect(
        old.commit({
          messages: [{ topic: snapshots, partition: 1, key: 'k', value: 'old-2-stale' }],
          offsets: [{ topic: input, partition: 1, offset: '7' }],
          generation,
        }),
      ).rejects.toMatchObject({ name: 'SnapshotWriteFencedError', code: 'FENCED', reason: 'producer-epoch' });

      const reader = new PartitionReader(kafka.client);
      try {
        const values: string[] = [];
        await reader.read({
          topic: snapshots,
          partition: 1,
          fromOffset: '0',
          stallTimeoutMs: 20_000,
          onRecords: (rs) => {
            for (const r of rs) values.push(String(r.value));
          },
        });
        expect(values).toEqual(['old-1', 'new-1']);
      } finally {
        await reader.close();
      }
      expect((await offsets.fetch(groupId, input, [1])).get(1)).toBe('6');
    } finally {
      await closeAll(
        () => old.close(),
        () => taker.close(),
        () => offsets.close(),
        async () => member?.consumer.disconnect(),
      );
    }
  });

  it('commits 30 back-to-back transactions that start with sendOffsets (AddOffsetsToTxn retried)', async () => {
    const groupId = unique('group');
    const writer = new TransactionalWriter({ client: kafka.client, transactionalIdPrefix: unique('app'), partition: 0, groupId, transactionVersion });
    const offsets = new CommittedOffsets(kafka.client);
    let member: RunningMember | undefined;
    try {
      member = await startMember(kafka.client, { groupId }, input);
      const generation = await member.membership.waitForJoin(30_000);
      const failures: unknown[] = [];
      const deadline = Date.now() + 60_000;
      for (let i = 1; i <= 30 && Date.now() < deadline; i++) {
        try {
          await writer.commit({ messages: [], offsets: [{ topic: input, partition: 0, offset: String(i) }], generation });
        } catch (err) {
          failures.push(err);
        }
      }
      expect(failures).toEqual([]);
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('30');
      expect(writer.producersCreated).toBe(1);
    } finally {
      await closeAll(
        () => writer.close(),
        () => offsets.close(),
        async () => member?.consumer.disconnect(),
      );
    }
  });

  it('an EndTxn(commit) whose connection is cut after it went out: outcome unknown (SnapshotCommitTimeoutError with what was sent), and it did commit', async () => {
    const groupId = unique('group');
    const proxy = await kafkaProxy(kafka.client);
    const writer = new TransactionalWriter({ client: proxiedClient(kafka.client, proxy), transactionalIdPrefix: unique('app'), partition: 0, groupId, transactionVersion });
    const offsets = new CommittedOffsets(kafka.client);
    let member: RunningMember | undefined;
    try {
      member = await startMember(kafka.client, { groupId }, input);
      const generation = await member.membership.waitForJoin(30_000);
      const fired = proxy.arm({ apiKey: 26, action: 'cut', match: isEndTxnCommit });
      const error = await writer
        .commit({ messages: [{ topic: snapshots, partition: 0, key: 'k', value: 'v1' }], offsets: [{ topic: input, partition: 0, offset: '12' }], generation })
        .catch((e: unknown) => e);
      await fired;
      expect(error).toBeInstanceOf(SnapshotCommitTimeoutError);
      expect(error).toMatchObject({ code: 'COMMIT_TIMEOUT', timeoutMs: undefined, sent: [{ topic: snapshots, partition: 0, baseOffset: '0', count: 1 }] });
      expect((error as Error).message).toMatch(/got no answer \(KafkaJS\w+: /);
      // The next producer's initialization completes what the coordinator has: here, the commit.
      await writer.init();
      expect(await readAll(kafka.client, snapshots)).toEqual(['v1']);
      expect((await offsets.fetch(groupId, input, [0])).get(0)).toBe('12');
      expect(writer.producersCreated).toBe(2);
    } finally {
      await closeAll(
        () => writer.close(),
        () => offsets.close(),
        async () => member?.consumer.disconnect(),
        () => proxy.close(),
      );
    }
  });
});
