/**
 * The cassandra-driver patch (patches/cassandra-driver+4.10.0.patch), on a real client of the real
 * Cassandra. The driver's control connection refreshes itself when its host goes down or its socket
 * closes; a second refresh that starts while the first awaits the cluster's metadata resets the
 * connection to null under it, and the first then dereferenced it — an unhandled TypeError from a
 * timer that killed the worker (seen in the chaos suite through Cassandra restarts: "Cannot read
 * properties of null (reading 'endpoint' / 'once')"). Patched, the first refresh leaves the work
 * to the one that took over, and the client stays connected.
 */
import { Client } from 'cassandra-driver';
import { cassandraContactPoints, requireCassandra } from '../../support/servers';

interface ControlConnection {
  _refresh(hostIterator?: unknown): Promise<void>;
  _refreshHosts(...args: unknown[]): Promise<void>;
  connection: unknown;
}

async function connected(): Promise<{ client: Client; cc: ControlConnection }> {
  await requireCassandra();
  const client = new Client({ contactPoints: [...cassandraContactPoints], localDataCenter: 'datacenter1' });
  await client.connect();
  return { client, cc: (client as unknown as { controlConnection: ControlConnection }).controlConnection };
}

/** The first metadata refresh of `cc._refresh()` starts a second refresh just before it ends (or fails). */
function secondRefreshDuringTheFirst(cc: ControlConnection, fail: boolean): { second: () => Promise<void> | undefined } {
  const original = cc._refreshHosts.bind(cc);
  let second: Promise<void> | undefined;
  cc._refreshHosts = async (...args: unknown[]) => {
    await original(...args);
    if (!second) {
      second = cc._refresh();
      if (fail) throw new Error('metadata read failed (test)');
    }
  };
  return { second: () => second };
}

test.each([
  ['succeeds', false],
  ['fails', true],
])('a control-connection refresh whose metadata read %s while a second refresh starts settles without a TypeError, and the client keeps working', async (_name, fail) => {
  const { client, cc } = await connected();
  try {
    const race = secondRefreshDuringTheFirst(cc, fail);
    await expect(cc._refresh()).resolves.toBeUndefined();
    expect(race.second()).toBeDefined();
    await expect(race.second()).resolves.toBeUndefined();
    expect(cc.connection).not.toBeNull();
    const rs = await client.execute('SELECT release_version FROM system.local');
    expect(rs.rows).toHaveLength(1);
  } finally {
    await client.shutdown();
  }
});
