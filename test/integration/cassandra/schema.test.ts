
import { defineFlow } from '../../../define-flow';
import { CassandraBackend, CassandraSchemaError, ensureSchema, type SchemaSettings, schemaCql } from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import { cassandraContactPoints, cassandraScope, closeAll, dropKeyspace, keyspaceName, rawClient } from '../../support/servers';
import { recoverStates, startBackend } from './support';

const cassandra = cassandraScope('kft_schema');
const { keyspace } = cassandra;

async function columns(table: string): Promise<Record<string, string>> {
  const rs = await cassandra.raw.execute('SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?', [keyspace, table], {
    prepare: true,
  });
  return Object.fromEntries(rs.rows.map((r) => [String(r.get('column_name')), String(r.get('type'))]));
}

test('created on start with the replication and table names given; a second start creates nothing', async () => {
  const first = await startBackend(keyspace, {
    mode: 'journal+snapshots',
    replication: { class: 'SimpleStrategy', replication_factor: 1 },
    tables: { snapshots: 'snaps', keys: 'flow_keys', journals: 'events' },
  });
  try {
    expect(first.schema.created).toHaveLength(5); // keyspace, 3 tables, the keys table's created_date index
    expect(first.schema.created[0]).toMatch(new RegExp(`^CREATE KEYSPACE IF NOT EXISTS ${keyspace} WITH replication`));
    const ks = (await cassandra.raw.execute('SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?', [keyspace], { prepare: true })).first();
    expect(ks.get('replication')).toMatchObject({ class: 'org.apache.cassandra.locator.SimpleStrategy', replication_factor: '1' });
    expect(await columns('snaps')).toEqual({
      application_id: 'text',
      group_id: 'text',
      topic: 'text',
      partition: 'int',
      key: 'text',
      offset: 'bigint',
      created: 'timestamp',
      metadata: 'text',
      value: 'blob',
      generation: 'bigint',
    });
    expect(await columns('flow_keys')).toMatchObject({ segment: 'bigint', created_date: 'date' });
    expect(await columns('events')).toMatchObject({ offset: 'bigint', headers: 'map<text, text>', timestamp_type: 'text', generation: 'bigint' });
  } finally {
    await first.close();
  }
  const second = await startBackend(keyspace, { mode: 'journal+snapshots', tables: { snapshots: 'snaps', keys: 'flow_keys', journals: 'events' } });
  try {
    expect(second.schema.created).toEqual([]);
  } finally {
    await second.close();
  }
});

test("a kafka-flow snapshots table (no generation column) gets it for fencing 'lwt'; not with 'none' or autoCreate off", async () => {
  await cassandra.raw.execute(
    `CREATE TABLE ${keyspace}.kafka_flow_snapshots (application_id TEXT, group_id TEXT, topic TEXT, partition INT, key TEXT, offset BIGINT, created TIMESTAMP, metadata TEXT, value BLOB, PRIMARY KEY((application_id, group_id, topic, partition, key)))`,
  );
  const tables = { snapshots: 'kafka_flow_snapshots', keys: 'kf_keys' };
  const plain = await startBackend(keyspace, { tables, fencing: 'none' });
  await plain.close();
  expect(await columns('kafka_flow_snapshots')).not.toHaveProperty('generation');

  const refused = startBackend(keyspace, { tables, autoCreate: false });
  await expect(refused).rejects.toBeInstanceOf(CassandraSchemaError);
  await expect(refused).rejects.toThrow(`run ALTER TABLE ${keyspace}.kafka_flow_snapshots ADD generation bigint`);

  const fenced = await startBackend(keyspace, { tables });
  await fenced.close();
  expect(fenced.schema.created).toEqual([`ALTER TABLE ${keyspace}.kafka_flow_snapshots ADD generation bigint`]);
  expect(await columns('kafka_flow_snapshots')).toHaveProperty('generation', 'bigint');
});

test("a kafka-flow journals table (no generation column) gets a static one for fencing 'lwt' (its purge's fence)", async () => {
  await cassandra.raw.execute(
    `CREATE TABLE ${keyspace}.kafka_flow_records (application_id TEXT, group_id TEXT, topic TEXT, partition INT, key TEXT, offset BIGINT, created TIMESTAMP, timestamp TIMESTAMP, timestamp_type TEXT, headers MAP<TEXT, TEXT>, metadata TEXT, value BLOB, PRIMARY KEY((application_id, group_id, topic, partition, key), offset))`,
  );
  const tables = { journals: 'kafka_flow_records', keys: 'kfr_keys' };
  const plain = await startBackend(keyspace, { mode: 'journal', tables, fencing: 'none' });
  await plain.close();
  expect(await columns('kafka_flow_records')).not.toHaveProperty('generation');
  await expect(startBackend(keyspace, { mode: 'journal', tables, autoCreate: false })).rejects.toThrow(
    `run ALTER TABLE ${keyspace}.kafka_flow_records ADD generation bigint static`,
  );
  const fenced = await startBackend(keyspace, { mode: 'journal', tables });
  await fenced.close();
  expect(fenced.schema.created).toEqual([`ALTER TABLE ${keyspace}.kafka_flow_records ADD generation bigint static`]);
  const kind = await cassandra.raw.execute(
    "SELECT kind FROM system_schema.columns WHERE keyspace_name = ? AND table_name = 'kafka_flow_records' AND column_name = 'generation'",
    [keyspace],
    { prepare: true },
  );
  expect(kind.first()?.get('kind')).toBe('static');
});

test('an existing table with other columns is refused, naming what differs', async () => {
  await cassandra.raw.execute(
    `CREATE TABLE ${keyspace}.wrong_snapshots (application_id TEXT, group_id TEXT, topic TEXT, partition INT, key TEXT, offset INT, value TEXT, PRIMARY KEY((application_id, group_id, topic), partition, key))`,
  );
  const start = startBackend(keyspace, { tables: { snapshots: 'wrong_snapshots', keys: 'kf_keys' } });
  await expect(start).rejects.toBeInstanceOf(CassandraSchemaError);
  await expect(start).rejects.toThrow(
    new RegExp(
      `table ${keyspace}\\.wrong_snapshots \\(snapshots\\) exists but does not match what the backend needs: ` +
        'column offset is int, needs bigint; column created \\(timestamp\\) is missing; column metadata \\(text\\) is missing; ' +
        'column value is text, needs blob; partition key is \\(application_id, group_id, topic\\), needs \\(application_id, group_id, topic, partition, key\\); ' +
        'clustering columns is \\(partition, key\\), needs \\(\\)',
    ),
  );
});

test('with autoCreate off, a missing keyspace or table is an error that shows the CQL to run', async () => {
  const missingKeyspace = keyspaceName('kft_absent');
  await expect(startBackend(missingKeyspace, { autoCreate: false })).rejects.toThrow(
    new RegExp(`keyspace ${missingKeyspace} does not exist and autoCreate is off: create it \\(e\\.g\\. CREATE KEYSPACE IF NOT EXISTS ${missingKeyspace}`),
  );
  await expect(startBackend(keyspace, { autoCreate: false, tables: { snapshots: 'nowhere', keys: 'kf_keys' } })).rejects.toThrow(
    new RegExp(`table ${keyspace}\\.nowhere \\(snapshots\\) does not exist and autoCreate is off: create it with\\nCREATE TABLE IF NOT EXISTS ${keyspace}\\.nowhere`),
  );
});

test('an unreachable Cassandra fails start with a CassandraPersistenceError naming the contact points', async () => {
  const start = CassandraBackend.start({
    applicationId: 'app',
    groupId: 'group',
    keyspace,
    contactPoints: ['127.0.0.1:1'],
    clientOptions: { socketOptions: { connectTimeout: 500 } },
  });
  await expect(start).rejects.toMatchObject({ name: 'CassandraPersistenceError', code: 'CASSANDRA', operation: 'connect' });
  await expect(start).rejects.toThrow(/^connect failed: .*no Cassandra node answered at 127\.0\.0\.1:1: is it running and reachable\?/);
});

test("forFlow: a defined flow's cassandra options reach the backend (application id = flow name, journals with its value codec)", async () => {
  const definition = defineFlow<{ n: number }, string>({
    name: 'sales',
    groupId: 'sales-group',
    topics: ['sales'],
    fold: (s, r) => ({ n: (s?.n ?? 0) + r.value.length }),
    valueCodec: { encode: (v) => Buffer.from(v.toUpperCase()), decode: (b) => b.toString('utf8') },
    persistence: {
      backend: 'cassandra',
      mode: 'journal+snapshots',
      keyspace,
      contactPoints: [...cassandraContactPoints],
      tables: { snapshots: 'flow_snapshots', keys: 'flow_keys2', journals: 'flow_records' },
      fencing: 'none',
      keySegments: 50,
    },
  });
  const backend = await CassandraBackend.forFlow(definition);
  try {
    expect(backend.settings).toMatchObject({ applicationId: 'sales', fencing: 'none', keySegments: 50, keyspace });
    expect(backend.groupId).toBe('sales-group');
    const p = await backend.forPartition({ topic: 'sales', partition: 0, generation: 3, committer: new InMemoryOffsetCommitter() });
    expect(p.snapshots!.generation).toBeUndefined(); // no fence, no generation written
    const event = { topic: 'sales', partition: 0, key: 'k', offset: '4', value: 'abc', timestamp: '0', headers: {} };
    await p.write({ writes: [{ key: 'k', snapshot: { state: { n: 3 }, offset: 4 }, events: [event], addKey: true }] });
    const row = (
      await cassandra.raw.execute(`SELECT application_id, group_id, value FROM ${keyspace}.flow_records WHERE application_id = 'sales' AND group_id = 'sales-group' AND topic = 'sales' AND partition = 0 AND key = 'k'`)
    ).first();
    expect((row.get('value') as Buffer).toString()).toBe('ABC'); // the flow's value codec
    expect([...(await recoverStates(p))]).toEqual([['k', { state: { n: 3 }, offset: 4, events: undefined }]]);
  } finally {
    await backend.close();
  }
});

test('a start racing another process that creates the schema returns only once its tables answer (system_schema lists a table before it can be queried)', async () => {
  // Two workers of a new flow start at once: one creates the tables while the other finds them
  // in system_schema, a few hundred ms (seconds under load) before the node serves them; its
  // recovery then failed with "table keys does not exist".
  const racing = keyspaceName('kft_schema_race');
  const settings: SchemaSettings = {
    keyspace: racing,
    replication: { class: 'SimpleStrategy', replication_factor: 1 },
    tables: { snapshots: 'snapshots_v2', keys: 'keys', journals: 'records' },
    autoCreate: true,
  };
  const other = await rawClient();
  try {
    const creating = (async () => {
      for (const cql of schemaCql(settings, ['snapshots', 'keys'])) await other.execute(cql);
    })();
    creating.catch(() => undefined);
    const listed = async () =>
      (await cassandra.raw.execute('SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?', [racing, 'keys'], { prepare: true })).rows.length > 0;
    const deadline = Date.now() + 30_000;
    while (!(await listed())) {
      if (Date.now() > deadline) throw new Error(`the other process's CREATE TABLE ${racing}.keys never showed in system_schema`);
    }
    const result = await ensureSchema(cassandra.raw, settings, ['snapshots', 'keys'], true);
    expect(result.created).toEqual([]); // found, not created: this start only waited
    for (const table of ['snapshots_v2', 'keys']) await cassandra.raw.execute(`SELECT * FROM ${racing}.${table} LIMIT 1`);
    await creating;
  } finally {
    await closeAll(
      () => other.shutdown(),
      () => dropKeyspace(racing),
    );
  }
});
