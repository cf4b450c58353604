/**
 * Moves a flow's Cassandra snapshots from kafka-flow's table (snapshots_v2) into the opt-in
 * by-partition layout's table (docs/cassandra.md, "Migrating"). The flow module must already say
 * `persistence: { backend: 'cassandra', layout: 'by-partition', ... }`: the target table is created
 * or checked with its options (keyspace, table name, buckets, TTLs). Safe to run again.
 *
 *   node bin/run-ts.js scripts/cassandra-migrate-layout.ts <flow-module> [--from-table snapshots_v2] [--from-keyspace kafka_flow]
 *
 * Prints one JSON line per page (progress) and the final report. Environment as the worker's
 * (CASSANDRA_CONTACT_POINTS, CASSANDRA_USERNAME/PASSWORD, CASSANDRA_TLS_*).
 */
import { parseArgs } from 'node:util';
import { formatFatal } from '../config/errors';
import { CassandraBackend, migrateSnapshotsToByPartition } from '../persistence/cassandra';
import { loadFlowModule } from '../workers/cli/flow-module';

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { 'from-table': { type: 'string' }, 'from-keyspace': { type: 'string' } },
  });
  const modulePath = positionals[0];
  if (!modulePath) {
    process.stderr.write('usage: node bin/run-ts.js scripts/cassandra-migrate-layout.ts <flow-module> [--from-table snapshots_v2] [--from-keyspace ks]\n');
    process.exit(2);
  }
  const definition = loadFlowModule(modulePath);
  const backend = await CassandraBackend.forFlow<unknown, unknown>(definition);
  try {
    const report = await migrateSnapshotsToByPartition(backend, {
      fromTable: values['from-table'],
      fromKeyspace: values['from-keyspace'],
      onProgress: (r) => process.stdout.write(`${JSON.stringify({ progress: r })}\n`),
    });
    process.stdout.write(`${JSON.stringify({ done: report })}\n`);
  } finally {
    await backend.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${formatFatal(err)}\n`);
  process.exit(1);
});
