// The input topic read back from offset 0: the oracle's reference.
import { type createKafkaClient, PartitionReader } from '../kafka';
import type { ChaosValue } from '../test/fixtures/chaos-flow';
import { OUTPUT_SOURCE_HEADER } from '../flow/emit';
import type { InputRecord, ReadOutput } from './oracle';
import { PARTITIONS } from './settings';

export async function readInput(client: ReturnType<typeof createKafkaClient>, topic: string) {
  const reader = new PartitionReader(client);
  const records: InputRecord[] = [];
  const partitionOf = new Map<string, number>();
  const history = new Map<string, InputRecord[]>();
  try {
    await reader.readTopic(topic, PARTITIONS, (r, partition) => {
      const rec: InputRecord = { partition, offset: r.offset, key: String(r.key), value: JSON.parse(String(r.value)) as ChaosValue };
      records.push(rec);
      partitionOf.set(rec.key, partition);
      const h = history.get(rec.key) ?? [];
      if (h.length === 0) history.set(rec.key, h);
      h.push(rec);
    });
  } finally {
    await reader.close();
  }
  return { records, partitionOf, history };
}

/** The output topic read back read_committed, from offset 0 of every partition. */
export async function readOutputs(client: ReturnType<typeof createKafkaClient>, topic: string): Promise<ReadOutput[]> {
  const reader = new PartitionReader(client);
  const outputs: ReadOutput[] = [];
  try {
    await reader.readTopic(topic, PARTITIONS, (r) => {
      const h = r.headers[OUTPUT_SOURCE_HEADER];
      const source = h === undefined ? undefined : String(Array.isArray(h) ? h[0] : h);
      outputs.push({ source, value: String(r.value) });
    });
  } finally {
    await reader.close();
  }
  return outputs;
}
