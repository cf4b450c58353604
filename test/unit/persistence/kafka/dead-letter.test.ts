import type { KafkaAdmin } from '../../../../kafka/admin';
import { keyPartition } from '../../../../kafka/internals';
import { OutputTopics } from '../../../../persistence/kafka/dead-letter';
import type { OutputRecord } from '../../../../core/persistence-types';

/** An in-memory stand-in for the admin client: topics and their partition counts, calls counted. */
class FakeAdmin {
  readonly topics = new Map<string, number>([['alerts', 6], ['audit', 3]]);
  describes = 0;
  async describeTopic(topic: string) {
    this.describes++;
    const partitions = this.topics.get(topic);
    return partitions === undefined ? undefined : { partitions };
  }
  async ensureTopics(specs: Array<{ topic: string; partitions: number }>) {
    for (const s of specs) this.topics.set(s.topic, s.partitions);
  }
}

const emitted = (topic: string, key: string | Buffer | null, value: string, partition?: number): OutputRecord => ({
  kind: 'emitted',
  topic,
  key,
  partition,
  value: Buffer.from(value),
  headers: { 'kafka-flow-source': `in/2/${value}/0` },
});

describe('OutputTopics.messages', () => {
  test('keyed outputs go to their murmur2 partition (runs of one key included), keyless and dead letters to the input partition, an explicit partition wins', async () => {
    const admin = new FakeAdmin();
    const topics = new OutputTopics(admin as unknown as KafkaAdmin);
    const outputs: OutputRecord[] = [
      emitted('alerts', 'k1', '1'),
      emitted('alerts', 'k1', '2'),
      emitted('audit', 'k1', '3'), // same key, another topic: its own partition count
      emitted('alerts', 'k2', '4'),
      emitted('alerts', 'k1', '5'),
      emitted('alerts', Buffer.from('k3'), '6'),
      emitted('alerts', Buffer.from('k3'), '7'),
      emitted('alerts', null, '8'),
      emitted('alerts', 'k2', '9', 4),
      { kind: 'dead-letter', topic: 'alerts', key: 'k2', value: Buffer.from('x'), headers: {} },
      emitted('fresh', 'k4', '10'), // not there yet: created with enough partitions for the input's (2 → 3)
    ];
    const messages = await topics.messages(outputs, { topic: 'in', partition: 2 });
    expect(messages.map((m) => [m.topic, m.key === null ? null : String(m.key), m.partition])).toEqual([
      ['alerts', 'k1', keyPartition('k1', 6)],
      ['alerts', 'k1', keyPartition('k1', 6)],
      ['audit', 'k1', keyPartition('k1', 3)],
      ['alerts', 'k2', keyPartition('k2', 6)],
      ['alerts', 'k1', keyPartition('k1', 6)],
      ['alerts', 'k3', keyPartition('k3', 6)],
      ['alerts', 'k3', keyPartition('k3', 6)],
      ['alerts', '', 2],
      ['alerts', 'k2', 4],
      ['alerts', 'k2', 2],
      ['fresh', 'k4', keyPartition('k4', 3)],
    ]);
    expect(messages[0]!.headers).toEqual({ 'kafka-flow-source': 'in/2/1/0' });
    expect(admin.topics.get('fresh')).toBe(3);
    // Each topic's partition count is looked up once (and remembered), not per record.
    const describes = admin.describes;
    await topics.messages(outputs, { topic: 'in', partition: 2 });
    expect(admin.describes).toBe(describes);
  });
});
