// The offset-hash fixture flow, plus one stderr line per partition at its first fold
// (`{"firstFold":<epoch ms>,"partition":p}`): what scripts/assign-latency.ts measures to.
import { defineFlow } from '../index';
import { type HashState, step } from '../test/fixtures/offset-hash-flow';

const seen = new Set<number>();
export default defineFlow<HashState, { n: number }>({
  name: process.env.TEST_FLOW_NAME ?? 'assign-latency',
  groupId: process.env.TEST_FLOW_GROUP ?? 'assign-latency',
  topics: [process.env.TEST_FLOW_TOPIC ?? 'assign-latency'],
  fold: (state, record) => {
    if (!seen.has(record.partition)) {
      seen.add(record.partition);
      process.stderr.write(`${JSON.stringify({ firstFold: Date.now(), partition: record.partition })}\n`);
    }
    return step(state, record.offset);
  },
  persistence: process.env.TEST_FLOW_BACKEND === 'memory' ? { backend: 'memory' } : { backend: 'kafka', transactional: true },
  timers: { persistPeriodically: { fireEvery: '1s', persistEvery: 2000, flushOnRevoke: true } },
  consumer: { sessionTimeout: 10_000, heartbeatInterval: 1000 },
});
