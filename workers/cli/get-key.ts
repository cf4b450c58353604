import { brokersFromEnv } from '../../config/env';
import { readKafkaSecurity } from '../../config/security';
import type { FlowDefinition } from '../../define-flow';
import { KafkaAdmin } from '../../kafka/admin';
import { createKafkaClient } from '../../kafka/client';
import { connectTemporalClient } from '../connect/temporal-client';
import { type KeyAnswer, type KeyQuery, queryKey } from '../keys/key-query';
import { keySources } from '../keys/key-sources';

/** `get`: a key's live state from its owner, or its persisted snapshot (workers/keys/key-query.ts). */
export async function getKey(definition: FlowDefinition<unknown, unknown>, query: KeyQuery): Promise<KeyAnswer> {
  const admin = new KafkaAdmin(createKafkaClient({ brokers: brokersFromEnv(), clientId: 'kafka-flow-temporal-get', logLevel: 'nothing', security: readKafkaSecurity() }));
  const temporal = await connectTemporalClient();
  try {
    return await queryKey(definition, query, keySources({ definition, temporal: temporal.client, admin }));
  } finally {
    await admin.close().catch(() => undefined);
    await temporal.close();
  }
}
