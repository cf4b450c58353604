// The input topic read back from offset 0: the oracle's reference.
import { type createKafkaClient, PartitionReader } from '../kafka';
import type { ChaosValue } from '../test/fixtures/chaosFlow';
import type { InputRecord } from './oracle';
import { PARTITIONS } from './settings';

export async function readInput(client: ReturnType<typeof createKafkaClient>, topic: string) {
  const reader = new PartitionReader(client);
  const records: InputRecord[] = [];
  const partitionOf = new Map<string, number>();
  const history = new Map<string, InputRecord[]>();
  try {
    for (let p = 0; p < PARTITIONS; p++) {
      await reader.read({
        topic,
        partition: p,
        fromOffset: '0',
        onRecords: (batch) => {
          for (const r of batch) {
            const rec: InputRecord = { partition: p, offset: r.offset, key: String(r.key), value: JSON.parse(String(r.value)) as ChaosValue };
            records.push(rec);
            partitionOf.set(rec.key, p);
            const h = history.get(rec.key) ?? [];
            if (h.length === 0) history.set(rec.key, h);
            h.push(rec);
          }
        },
      });
    }
  } finally {
    await reader.close();
  }
  return { records, partitionOf, history };
}

// A chaos driver must not die half-way and leave private servers and workers behind: an error
