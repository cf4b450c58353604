// The snapshot record format (kafka-flow's JSON KafkaSnapshot, framed by the engine's Compressor),
// the stall diagnosis fed the observations real stalls produce, and the snapshot topic checks.
import type { Codec } from '../../../../core/codec/codec';
import { Compressor } from '../../../../core/codec/compressor';
import type { ReadOptions } from '../../../../kafka/partition-reader';
import { diagnoseStall } from '../../../../persistence/kafka/diagnose';
import { RecoveryReadStalledError } from '../../../../persistence/kafka/errors';
import { rangeRead, readSnapshotPartition, type SnapshotLogReader } from '../../../../persistence/kafka/recovery';
import { snapshotFormat } from '../../../../persistence/kafka/snapshot-format';
import { defaultSnapshotTopic, defaultTransactionalIdPrefix, snapshotTopicProblems } from '../../../../persistence/kafka/topic';

describe('snapshot record format', () => {
  const format = snapshotFormat<{ n: number; tags: string[] }>();

  it('round-trips state and offset as kafka-flow\'s KafkaSnapshot JSON, framed by the Compressor', () => {
    const bytes = format.encode({ state: { n: 3, tags: ['a'] }, offset: 41 });
    const framed = new Compressor().decompress(bytes).toString('utf8');
    expect(JSON.parse(framed)).toEqual({ offset: 41, metadata: '', value: { n: 3, tags: ['a'] } });
    expect(bytes.readInt32BE(0)).toBe('{"compressed":false}'.length); // below the threshold: framed, not compressed
    expect(format.decode(bytes)).toEqual({ state: { n: 3, tags: ['a'] }, offset: 41 });
  });

  it('compresses at or above the threshold and reads it back', () => {
    const big = snapshotFormat<string>({ compressor: new Compressor({ compressionThreshold: 100 }) });
    const state = 'x'.repeat(10_240);
    const bytes = big.encode({ state, offset: 7 });
    expect(bytes.length).toBeLessThan(500);
    expect(big.decode(bytes)).toEqual({ state, offset: 7 });
  });

  it('reads what kafka-flow writes: raw JSON (no frame), the one-byte bool header, string offsets', () => {
    expect(format.decode(Buffer.from('{"offset":5,"metadata":"","value":{"n":1,"tags":[]}}'))).toEqual({ state: { n: 1, tags: [] }, offset: 5 });
    const header = Buffer.from([0x00]);
    const body = Buffer.from('{"offset":"6","value":{"n":2,"tags":[]}}');
    const boolFramed = Buffer.concat([Buffer.from([0, 0, 0, 1]), header, body]);
    expect(format.decode(boolFramed)).toEqual({ state: { n: 2, tags: [] }, offset: 6 });
  });

  it('embeds a custom JSON state codec\'s bytes and refuses a codec that does not write JSON', () => {
    const upper: Codec<string> = { encode: (s) => Buffer.from(JSON.stringify(s.toUpperCase())), decode: (b) => (JSON.parse(b.toString()) as string).toLowerCase() };
    const custom = snapshotFormat<string>({ stateCodec: upper });
    expect(custom.decode(custom.encode({ state: 'abc', offset: 1 }))).toEqual({ state: 'abc', offset: 1 });
    const binary = snapshotFormat<string>({ stateCodec: { encode: () => Buffer.from([0xff, 0x00]), decode: () => '' } });
    expect(() => binary.encode({ state: 'x', offset: 1 })).toThrow(/must produce JSON/);
  });

  it('rejects bytes that are not a snapshot envelope', () => {
    expect(() => format.decode(Buffer.from('{"state":1}'))).toThrow(/no "value"/);
    expect(() => format.decode(Buffer.from('{"offset":-1,"value":1}'))).toThrow(/"offset" is -1/);
    expect(() => format.encode({ state: { n: 1, tags: [] }, offset: 1.5 })).toThrow(RangeError);
  });
});

describe('stall diagnosis', () => {
  const base = { topic: 's', partition: 0, position: '5', bound: '10', stalledForMs: 3000 };

  it('truncation: the log end regressed below the captured bound', () => {
    expect(diagnoseStall({ ...base, logEnd: '0', lastStable: '0' }).cause).toBe('truncation');
    expect(diagnoseStall({ ...base, logEnd: '8', lastStable: '8' }).cause).toBe('truncation');
    const below = diagnoseStall({ ...base, position: '9', logEnd: '3', lastStable: '3' });
    expect(below).toMatchObject({ cause: 'truncation' });
    expect(below.explanation).toMatch(/below the position 9/);
  });

  it('outlived transaction: the log covers the bound, the last stable offset pins the position', () => {
    const d = diagnoseStall({ ...base, logEnd: '12', lastStable: '5' });
    expect(d.cause).toBe('outlived-transaction');
    expect(d.explanation).toMatch(/kafka-transactions\.sh/);
    expect(diagnoseStall({ ...base, logEnd: '10', lastStable: '3' }).cause).toBe('outlived-transaction');
  });

  it('outlived transaction with the open transactions read: names the one that pins the read and the command that ends it', () => {
    const openTransactions = [
      { producerId: '9', producerEpoch: 1, startOffset: '7' },
      { producerId: '4', producerEpoch: 3, startOffset: '5' },
    ];
    const d = diagnoseStall({ ...base, logEnd: '12', lastStable: '5', openTransactions });
    expect(d.explanation).toMatch(/producer 4's \(epoch 3\), open since offset 5/);
    expect(d.explanation).toContain('kafka-transactions.sh --bootstrap-server <broker> abort --topic s --partition 0 --start-offset 5');
    expect(diagnoseStall({ ...base, logEnd: '12', lastStable: '5', openTransactions: [] }).explanation).not.toMatch(/open since/);
  });

  it('undetermined: a failed re-read never masks the stall, and nothing is guessed', () => {
    const failed = diagnoseStall({ ...base, reReadError: new Error('ECONNREFUSED') });
    expect(failed.cause).toBe('undetermined');
    expect(failed.explanation).toMatch(/ECONNREFUSED/);
    expect(diagnoseStall({ ...base, logEnd: '10', lastStable: '10' }).cause).toBe('undetermined');
  });
});

/** A scripted reader: offsets as a broker reports them, a read that never progresses. */
function stuckReader(offsets: { logEnd: string[]; lastStable: string[]; failReRead?: boolean }): SnapshotLogReader & { reads: ReadOptions[] } {
  const logEnds = [...offsets.logEnd];
  const stables = [...offsets.lastStable];
  let calls = 0;
  const reader = {
    reads: [] as ReadOptions[],
    logEndOffset: async () => {
      if (offsets.failReRead && calls++ > 0) throw new Error('broker unreachable');
      return logEnds.length > 1 ? logEnds.shift()! : logEnds[0]!;
    },
    lastStableOffset: async () => (stables.length > 1 ? stables.shift()! : stables[0]!),
    logStartOffset: async () => '0',
    read: async (o: ReadOptions) => {
      reader.reads.push(o);
      o.onNoProgress?.({ topic: o.topic, partition: o.partition, position: '5', bound: o.toOffset!, stalledForMs: 6000 });
      throw await o.onStall!({ topic: o.topic, partition: o.partition, position: '5', bound: o.toOffset!, stalledForMs: 6000 });
    },
  };
  return reader;
}

describe('recovery read deadline', () => {
  const logs: string[] = [];
  const logger = { info: (_: unknown, m?: string) => logs.push(`info ${m}`), warn: (_: unknown, m?: string) => logs.push(`warn ${m}`), error: () => {}, debug: () => {} };

  it('captures the bound read_uncommitted, warns when an open transaction pins it, and fails with the diagnosis', async () => {
    const reader = stuckReader({ logEnd: ['10', '12'], lastStable: ['5', '5'] });
    const err = await readSnapshotPartition({ reader, topic: 's', partition: 0, stallTimeoutMs: 10, logger }).catch((e: unknown) => e);
    expect(reader.reads[0]).toMatchObject({ fromOffset: '0', toOffset: '10', stallTimeoutMs: 10 });
    expect(err).toBeInstanceOf(RecoveryReadStalledError);
    expect(err).toMatchObject({ code: 'RECOVERY_STALLED', cause: 'outlived-transaction', position: '5', bound: '10', observation: { logEnd: '12', lastStable: '5' } });
    expect(logs.some((l) => l.startsWith('warn snapshot recovery waits for open transaction'))).toBe(true);
    expect(logs.some((l) => l.includes('making no progress at offset 5'))).toBe(true);
  });

  it('upToLastStable (a standby copy\'s round): bounded by the last stable offset, nothing waited for, no warning', async () => {
    logs.length = 0;
    const reads: ReadOptions[] = [];
    const reader: SnapshotLogReader = {
      logEndOffset: async () => '10',
      lastStableOffset: async () => '6',
      logStartOffset: async () => '0',
      read: async (o: ReadOptions) => {
        reads.push(o);
        return { bound: o.toOffset!, records: 0, fetches: 1 };
      },
    };
    const read = await readSnapshotPartition({ reader, topic: 's', partition: 0, stallTimeoutMs: 10, fromOffset: '2', upToLastStable: true, logger });
    expect(reads[0]).toMatchObject({ fromOffset: '2', toOffset: '6' });
    expect(read.bound).toBe('6');
    expect(logs.some((l) => l.startsWith('warn'))).toBe(false);
  });

  it('names truncation when the re-read log end is below the bound, and undetermined when the re-read fails', async () => {
    const truncated = stuckReader({ logEnd: ['10', '2'], lastStable: ['10', '2'] });
    await expect(readSnapshotPartition({ reader: truncated, topic: 's', partition: 0, stallTimeoutMs: 10 })).rejects.toMatchObject({ cause: 'truncation' });
    const unreachable = stuckReader({ logEnd: ['10'], lastStable: ['10'], failReRead: true });
    const err = (await readSnapshotPartition({ reader: unreachable, topic: 's', partition: 0, stallTimeoutMs: 10 }).catch((e: unknown) => e)) as RecoveryReadStalledError;
    expect(err.cause).toBe('undetermined');
    expect(err.message).toMatch(/broker unreachable/);
  });
});

describe('snapshot topic', () => {
  it('is named after the group and flow (and the input topic when a flow reads several)', () => {
    expect(defaultSnapshotTopic('sales', 'totals')).toBe('sales-totals-snapshots');
    expect(defaultSnapshotTopic('sales', 'totals', 'orders')).toBe('sales-totals-orders-snapshots');
    expect(defaultTransactionalIdPrefix('sales', 'totals')).toBe('sales-totals');
  });

  it('must have the input topic\'s partition count and cleanup.policy=compact', () => {
    const spec = { topic: 't', partitions: 4 };
    expect(snapshotTopicProblems(spec, { partitions: 4, config: { 'cleanup.policy': 'compact' } })).toEqual([]);
    expect(snapshotTopicProblems(spec, { partitions: 3, config: { 'cleanup.policy': 'compact' } })).toEqual(['it has 3 partition(s), the input topic has 4']);
    expect(snapshotTopicProblems(spec, { partitions: 4, config: { 'cleanup.policy': 'compact,delete' } })).toEqual(['its cleanup.policy is "compact,delete", not "compact"']);
  });
});

describe('recovery read progress', () => {
  it('rangeRead: the share of [from, bound) read, an empty range read whole', () => {
    expect(rangeRead('100', '200', '149')).toBe(0.5);
    expect(rangeRead('100', '200', '199')).toBe(1);
    expect(rangeRead('0', '3', '0')).toBeCloseTo(1 / 3);
    expect(rangeRead('7', '7', '7')).toBe(1);
    expect(rangeRead('9007199254740000', '9007199254750000', '9007199254744999')).toBe(0.5);
  });

  it('reports the snapshot records read and the share of the range after each fetch', async () => {
    const fetches = [
      [
        { key: Buffer.from('a'), value: Buffer.from('1'), offset: '10' },
        { key: null, value: Buffer.from('x'), offset: '11' },
      ],
      [{ key: Buffer.from('a'), value: null, offset: '13' }],
      [],
    ];
    const reader: SnapshotLogReader = {
      logEndOffset: async () => '14',
      lastStableOffset: async () => '14',
      logStartOffset: async () => '10',
      read: async (o: ReadOptions) => {
        for (const batch of fetches) await o.onRecords(batch as never);
        return { bound: o.toOffset!, fetches: fetches.length } as never;
      },
    };
    const progress: Array<[number, number]> = [];
    const read = await readSnapshotPartition({ reader, topic: 's', partition: 0, stallTimeoutMs: 1000, onProgress: (n, f) => progress.push([n, f]) });
    // The key-less record is not ours (not counted); an empty fetch reports nothing.
    expect(progress).toEqual([
      [1, 0.5],
      [2, 1],
    ]);
    expect(read.records).toBe(2);
  });
});

describe('snapshot record format: key timers', () => {
  const timers = [
    { name: 'close', at: 1_700_000_030_000, time: 'event' as const },
    { name: 'kafka-flow:ttl', at: 1_700_000_600_000, time: 'processing' as const },
  ];

  it('carries a key\'s pending timers before its value, and reads them back; such a record is decoded in full (no peek)', () => {
    for (const format of [snapshotFormat<{ n: number }>(), snapshotFormat<{ n: number }>({ stateCodec: { encode: (s) => Buffer.from(JSON.stringify(s)), decode: (b) => JSON.parse(String(b)) } })]) {
      const bytes = format.encode({ state: { n: 1 }, offset: 42, timers });
      expect(new Compressor().decompress(bytes).toString()).toBe(
        `{"offset":42,"metadata":"","timers":[{"name":"close","at":1700000030000,"time":"event"},{"name":"kafka-flow:ttl","at":1700000600000,"time":"processing"}],"value":{"n":1}}`,
      );
      expect(format.decode(bytes)).toEqual({ state: { n: 1 }, offset: 42, timers });
      expect(format.peek(bytes)).toBeUndefined();
      // Without timers, the record is exactly as before (and peeked).
      const plain = format.encode({ state: { n: 1 }, offset: 42, timers: [] });
      expect(new Compressor().decompress(plain).toString()).toBe('{"offset":42,"metadata":"","value":{"n":1}}');
      expect(format.peek(plain)).toEqual({ deleted: false, offset: 42 });
    }
  });

  it('a damaged timer list is a corrupt snapshot, not a key without timers', () => {
    const format = snapshotFormat<{ n: number }>();
    const bad = new Compressor().compress(Buffer.from('{"offset":1,"metadata":"","timers":[{"name":"x","at":"soon"}],"value":{"n":1}}'));
    expect(() => format.decode(bad)).toThrow(/a timer is/);
  });
});
