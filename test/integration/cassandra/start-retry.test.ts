// A worker's Cassandra backend that could not start (Cassandra unreachable when the first
// partition was assigned) starts on a later assignment or recovery retry once Cassandra answers:
// a failed start is not remembered. Cassandra is reached through a loopback TCP proxy on a port
// where nothing listens at first (connection refused, as with Cassandra down), then the proxy is
// started there.
import { defineFlow } from '../../../define-flow';
import { CassandraPersistenceError } from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import { TcpProxy } from '../../../chaos/tcp-proxy';
import { cassandraBackend } from '../../../persistence/cassandra/factory';
import { cassandraContactPoints, cassandraScope, kafkaBrokers } from '../../support/servers';
import { fixedOwner } from '../../../persistence/partition-owner';

const { keyspace } = cassandraScope('kft_start_retry');

test('a failed start is retried by the next forPartition and succeeds once Cassandra answers', async () => {
  const [host, port] = cassandraContactPoints[0]!.split(/:(?=\d+$)/);
  const target = { host: host!, port: Number(port) };
  const probe = new TcpProxy('cassandra', 0, target); // only to find a free port
  await probe.start();
  const proxyPort = probe.port;
  await probe.close();
  let proxy: TcpProxy | undefined;
  const definition = defineFlow<number, string>({
    name: 'start-retry',
    groupId: 'start-retry-group',
    topics: ['orders'],
    fold: (s) => (s ?? 0) + 1,
    persistence: {
      backend: 'cassandra',
      keyspace,
      contactPoints: [`127.0.0.1:${proxyPort}`],
    },
  });
  const backend = cassandraBackend(definition, { brokers: kafkaBrokers });
  const committer = new InMemoryOffsetCommitter();
  const ownership = fixedOwner({ topic: 'orders', partition: 0, groupId: 'start-retry-group', generation: 1, memberId: 'm', commit: (tp, offset) => committer.commit(tp, offset) });
  try {
    const failed = await backend.forPartition(ownership).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(CassandraPersistenceError);
    expect((failed as Error).message).toContain(`127.0.0.1:${proxyPort}`);

    proxy = new TcpProxy('cassandra', proxyPort, target);
    await proxy.start();
    const persistence = await backend.forPartition(ownership);
    const recovered = [];
    for await (const key of persistence.recover()) recovered.push(key);
    expect(recovered).toEqual([]);
  } finally {
    await backend.close();
    await proxy?.close();
  }
}, 60_000);
