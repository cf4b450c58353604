// The input, output and dead-letter topics read back from offset 0, one record at a time.
import { OUTPUT_SOURCE_HEADER } from '../flow/emit';
import { DEAD_LETTER_HEADERS } from '../flow/poison';
import { type createKafkaClient, PartitionReader } from '../kafka';
import type { ChaosValue } from './flow';
import { deadLetterSource, type ReadOutput, Reference } from './oracle';
import { PARTITIONS } from './settings';

type Client = ReturnType<typeof createKafkaClient>;

/** The input topic folded into the oracle's reference as it is read. */
export async function readInput(client: Client, topic: string, timers = true): Promise<Reference> {
  const reader = new PartitionReader(client);
  const ref = new Reference(topic, timers);
  try {
    await reader.readTopic(topic, PARTITIONS, (r, partition) => {
      const raw = String(r.value);
      let value: ChaosValue | undefined;
      try {
        value = JSON.parse(raw) as ChaosValue;
      } catch {
        value = undefined; // not JSON: a poison record
      }
      ref.add({ partition, offset: r.offset, key: String(r.key), value, raw, timestamp: r.timestamp });
    });
  } finally {
    await reader.close();
  }
  return ref;
}

const header = (h: unknown): string | undefined => (h === undefined ? undefined : String(Array.isArray(h) ? h[0] : h));

/** The output topic read back read_committed, from offset 0 of every partition, each output handed to `onOutput`. */
export async function readOutputs(client: Client, topic: string, onOutput: (o: ReadOutput) => void): Promise<void> {
  const reader = new PartitionReader(client);
  try {
    await reader.readTopic(topic, PARTITIONS, (r) => onOutput({ source: header(r.headers[OUTPUT_SOURCE_HEADER]), value: String(r.value) }));
  } finally {
    await reader.close();
  }
}

/** The dead-letter topic read back read_committed; a dead letter's source is its input partition and offset. */
export async function readDeadLetters(client: Client, topic: string, onDeadLetter: (o: ReadOutput) => void): Promise<void> {
  const reader = new PartitionReader(client);
  try {
    await reader.readTopic(topic, PARTITIONS, (r) => {
      const partition = header(r.headers[DEAD_LETTER_HEADERS.partition]);
      const offset = header(r.headers[DEAD_LETTER_HEADERS.offset]);
      const source = partition === undefined || offset === undefined ? undefined : deadLetterSource({ partition: Number(partition), offset });
      onDeadLetter({ source, value: String(r.value) });
    });
  } finally {
    await reader.close();
  }
}
