import { Client, type ClientOptions } from 'cassandra-driver';
import { formatHostPort, readEnv } from '../../config/env';
import { ConfigError, KafkaFlowError } from '../../config/errors';
import type { Codec } from '../../core/codec/codec';
import { Compressor, compressorMetrics, withCompression } from '../../core/codec/compressor';
import { compressorCounters, type MetricsRegistry } from '../../core/codec/compressor-counters';
import { jsonCodec } from '../../core/codec/json';
import { type Logger, silentLogger } from '../../core/logger';
import type { BackendFlow } from '../backends';
import type { OutputSender } from '../output-sender';
import type { OffsetCommitter } from '../offset-committer';
import { type PersistenceMode, persistsJournal, persistsSnapshots, type TopicPartition } from '../../core/persistence-types';
import { backendClientOptions } from './client-options';
import { readCassandraSecurity } from '../../config/security';
import { cassandraAuthFailure } from './auth-errors';
import { cassandraConnectOptions } from './connect-options';
import { CassandraPersistenceError } from './errors';
import { CassandraJournalStore } from './journal-store';
import { CassandraKeyStore } from './key-store';
import { CassandraPersistenceMetrics } from './metrics';
import { type CassandraFlowOptions, checkLayout, type ResolvedCassandraOptions, resolveCassandraOptions, type TableRole } from './options';
import { CassandraPartitionPersistence, type RecoveryProgress } from './partition-persistence';
import { CassandraLocalState } from './local-state';
import { type SnapshotFormat, snapshotFormat } from '../kafka/snapshot-format';
import type { CommittedPosition } from '../offset-committer';
import { type EnsureSchemaResult, ensureSchema } from './schema';
import { CassandraSession } from './session';
import { CassandraSnapshotStore } from './snapshot-store';

export interface CassandraBackendOptions<S, V> extends CassandraFlowOptions {
  /** kafka-flow's `application_id`. */
  applicationId: string;
  /** The consumer group (`group_id`). */
  groupId: string;
  /** Which tables are used: snapshots and/or journals, and keys. Default 'snapshots'. */
  mode?: PersistenceMode;
  /** A connected (or connectable) client to use; the backend then does not shut it down. */
  client?: Client;
  /** Extra driver options when the backend makes its own client (socketOptions, policies, …). */
  clientOptions?: Partial<ClientOptions>;
  /** The state codec. Default JSON. */
  stateCodec?: Codec<S>;
  /** The journal's event value codec (the flow's value codec). Default JSON. */
  eventCodec?: Codec<V>;
  /** Snapshots of at least this many bytes are LZ4-compressed (kafka-flow's format). Default 10,000. */
  compressionThreshold?: number;
  /** A compressor to use instead (metrics, header format), or false to store the codec's bytes as they are. */
  compressor?: Compressor | false;
  logger?: Logger;
  /** The process's metrics (the engine's FlowMetrics): their registry gets this backend's metrics (and the compressor's). */
  metrics?: MetricsRegistry;
  /** The `flow` label of the metrics. Default: the application id. */
  flowName?: string;
}

/** What a partition's persistence is built from (the backend's factory builds it from the worker's PartitionOwner). */
export interface CassandraPartitionOwnership extends TopicPartition {
  /** The consumer generation the partition was assigned under: the 'lwt' fence's owner generation (plus fenceEpoch × 2³²). */
  readonly generation?: number;
  /** Commits the input offset after the writes (ConsumerOffsetCommitter for a real group). */
  readonly committer: OffsetCommitter;
  readonly onProgress?: (progress: RecoveryProgress) => void;
  /** Produces dead letters before the writes that pass their records (at least once). */
  readonly outputs?: OutputSender;
  /** A local state store under `dir` (docs/local-state.md#cassandra-persistence); `onDemand`: keys read from it (a bounded state cache). */
  readonly localState?: { readonly dir: string; readonly onDemand: boolean };
  /** The group's committed offset and metadata, read after the assignment (needed with `localState`). */
  readonly committed?: () => Promise<CommittedPosition | undefined>;
}

/**
 * The Cassandra persistence backend of one flow: a session, the schema checked or created, and
 * the three stores, from which `forPartition` builds each assigned partition's persistence.
 * `start` connects and prepares; `close` shuts the client down if the backend made it.
 */
export class CassandraBackend<S, V> {
  readonly settings: ResolvedCassandraOptions;
  readonly mode: PersistenceMode;
  readonly session: CassandraSession;
  readonly groupId: string;
  /** The snapshot store without a generation (forPartition makes one per assignment). */
  readonly snapshots: CassandraSnapshotStore<S> | undefined;
  /** The keys table; none in the by-partition layout's 'snapshots' mode (recovery scans the buckets). */
  readonly keys: CassandraKeyStore | undefined;
  readonly journal: CassandraJournalStore<V> | undefined;
  /** DDL run by start (empty when everything existed). */
  readonly schema: EnsureSchemaResult;
  private readonly ownsClient: boolean;
  private readonly log: Logger;
  private readonly hosts: Set<unknown> | undefined;
  private readonly metrics: { registry: CassandraPersistenceMetrics; flow: string } | undefined;
  private readonly flowName: string;
  /** How the local state stores keep snapshots: the snapshot topic's record format, with this backend's codec and compressor. */
  private readonly localFormat: SnapshotFormat<S>;

  private constructor(args: {
    settings: ResolvedCassandraOptions;
    mode: PersistenceMode;
    session: CassandraSession;
    groupId: string;
    snapshots: CassandraSnapshotStore<S> | undefined;
    keys: CassandraKeyStore | undefined;
    journal: CassandraJournalStore<V> | undefined;
    schema: EnsureSchemaResult;
    ownsClient: boolean;
    logger: Logger;
    hosts: Set<unknown> | undefined;
    metrics: { registry: CassandraPersistenceMetrics; flow: string } | undefined;
    flowName: string;
    localFormat: SnapshotFormat<S>;
  }) {
    this.settings = args.settings;
    this.mode = args.mode;
    this.session = args.session;
    this.groupId = args.groupId;
    this.snapshots = args.snapshots;
    this.keys = args.keys;
    this.journal = args.journal;
    this.schema = args.schema;
    this.ownsClient = args.ownsClient;
    this.log = args.logger;
    this.hosts = args.hosts;
    this.metrics = args.metrics;
    this.flowName = args.flowName;
    this.localFormat = args.localFormat;
  }

  /** Connects, checks or creates the keyspace and tables, and builds the stores. */
  static async start<S, V>(options: CassandraBackendOptions<S, V>): Promise<CassandraBackend<S, V>> {
    const {
      applicationId,
      groupId,
      mode = 'snapshots',
      client: given,
      clientOptions,
      stateCodec,
      eventCodec,
      compressionThreshold,
      compressor,
      logger = silentLogger,
      metrics: flowMetrics,
      flowName = applicationId,
      ...flowOptions
    } = options;
    if (!groupId) throw new ConfigError('Cassandra persistence needs a groupId');
    const settings = resolveCassandraOptions({ ...flowOptions, applicationId }, applicationId);
    checkLayout(flowOptions, mode);
    const contactPoints = settings.contactPoints ?? readEnv().cassandraContactPoints.map(formatHostPort);
    // CASSANDRA_USERNAME/PASSWORD, CASSANDRA_TLS_*, CASSANDRA_LOCAL_DATACENTER (a flow's own localDataCenter wins).
    const security = given ? undefined : readCassandraSecurity();
    const client =
      given ??
      new Client(
        backendClientOptions(
          {
            contactPoints: [...contactPoints],
            localDataCenter: flowOptions.localDataCenter ?? security?.localDataCenter ?? settings.localDataCenter,
            ...cassandraConnectOptions(security),
          },
          clientOptions,
        ),
      );
    const shownContactPoints = given ? ((given as unknown as { options?: ClientOptions }).options?.contactPoints ?? contactPoints) : contactPoints;
    const hosts = given ? undefined : trackHosts(client);
    try {
      await client.connect();
      if (hosts) for (const h of client.hosts.values()) hosts.add(h);
    } catch (err) {
      if (hosts) for (const h of client.hosts?.values() ?? []) hosts.add(h);
      if (!given) await shutdownClient(client, hosts);
      throw cassandraAuthFailure(shownContactPoints, security, err) ?? new CassandraPersistenceError({ operation: 'connect', contactPoints: shownContactPoints }, err);
    }
    try {
      // The keys table lists keys for recovery in the kafka-flow layout, and journals' keys; the
      // by-partition layout's recovery scans its buckets, so in 'snapshots' mode there is none.
      const needsKeys = settings.layout === 'kafka-flow' || persistsJournal(mode);
      const roles: TableRole[] = needsKeys ? ['keys'] : [];
      if (persistsSnapshots(mode)) roles.unshift('snapshots');
      if (persistsJournal(mode)) roles.push('journals');
      const schema =
        mode === 'none'
          ? { created: [] }
          : await ensureSchema(
              client,
              {
                keyspace: settings.keyspace,
                replication: settings.replication,
                tables: settings.tables,
                autoCreate: settings.autoCreate,
                layout: settings.layout,
                buckets: settings.buckets,
              },
              roles,
              settings.fencing !== 'none',
            );
      for (const cql of schema.created) logger.info({ cql }, 'cassandra: schema created');
      const session = new CassandraSession(client, {
        maxConcurrentReads: settings.maxConcurrentReads,
        maxConcurrentWrites: settings.maxConcurrentWrites,
        serialConsistency: settings.serialConsistency,
        contactPoints: shownContactPoints,
      });
      const common = { session, keyspace: settings.keyspace, applicationId: settings.applicationId, groupId };
      const keys = !needsKeys ? undefined : new CassandraKeyStore({
        ...common,
        table: settings.tables.keys,
        segments: settings.keySegments,
        consistency: settings.consistency.keys,
        ttlSeconds: settings.ttlSeconds.keys,
        listParallelism: settings.keyListParallelism,
        segmentsPerQuery: settings.segmentsPerQuery,
        scanRows: settings.keyScanRows,
      });
      const metrics = flowMetrics ? { registry: CassandraPersistenceMetrics.of(flowMetrics.registry), flow: flowName } : undefined;
      const compress =
        compressor === false
          ? undefined
          : (compressor ??
            new Compressor({
              compressionThreshold: compressionThreshold ?? 10_000,
              metrics: flowMetrics ? compressorMetrics(`${flowName}-snapshots`, compressorCounters(flowMetrics.registry)) : undefined,
            }));
      const baseCodec = stateCodec ?? jsonCodec<S>();
      const snapshots = persistsSnapshots(mode)
        ? new CassandraSnapshotStore<S>({
            ...common,
            table: settings.tables.snapshots,
            codec: compress ? withCompression(baseCodec, compress) : baseCodec,
            consistency: settings.consistency.snapshots,
            ttlSeconds: settings.ttlSeconds.snapshots,
            fencing: settings.fencing,
            fenceRowTtlSeconds: settings.fencing === 'lwt' ? settings.fenceRowTtlSeconds : 0,
            fenceEpoch: settings.fenceEpoch,
            keys,
            keyIndex: settings.fencing === 'timestamp' ? keys : undefined,
            layout: settings.layout,
            buckets: settings.buckets,
            scanParallelism: Math.max(1, Math.ceil(settings.maxConcurrentReads / 4)),
            logger,
            metrics,
          })
        : undefined;
      const journal = persistsJournal(mode)
        ? new CassandraJournalStore<V>({
            ...common,
            table: settings.tables.journals,
            codec: eventCodec ?? jsonCodec<V>(),
            consistency: settings.consistency.journals,
            ttlSeconds: settings.ttlSeconds.journals,
            fencing: settings.fencing,
            fenceRowTtlSeconds: settings.fencing === 'lwt' ? settings.fenceRowTtlSeconds : 0,
          })
        : undefined;
      return new CassandraBackend<S, V>({
        settings,
        mode,
        session,
        groupId,
        snapshots,
        keys,
        journal,
        schema,
        ownsClient: !given,
        logger,
        hosts,
        metrics,
        flowName,
        // The local stores' own compressor: their entries do not count in the snapshots' compression metrics.
        localFormat: snapshotFormat<S>({ stateCodec: baseCodec, compressor: new Compressor({ compressionThreshold: compressionThreshold ?? 10_000 }) }),
      });
    } catch (err) {
      if (!given) await shutdownClient(client, hosts);
      if (err instanceof KafkaFlowError) throw err; // ours: schema, config
      throw new CassandraPersistenceError(
        { operation: `schema check of keyspace ${settings.keyspace}`, contactPoints: shownContactPoints },
        err,
      );
    }
  }

  /**
   * The backend of a flow defined with `persistence: { backend: 'cassandra', ... }`: application
   * id from the options (default the flow's name), group from the flow, journal values with the
   * flow's value codec.
   */
  static forFlow<S, V>(
    definition: Pick<BackendFlow<V>, 'name' | 'groupId' | 'valueCodec' | 'persistence'>,
    extra: Pick<CassandraBackendOptions<S, V>, 'client' | 'clientOptions' | 'stateCodec' | 'compressor' | 'logger' | 'metrics'> = {},
  ): Promise<CassandraBackend<S, V>> {
    const p = definition.persistence;
    if (p.backend !== 'cassandra') {
      throw new ConfigError(`flow "${definition.name}" persists with the ${p.backend} backend, not cassandra`);
    }
    return CassandraBackend.start<S, V>({
      ...p.options,
      applicationId: p.options.applicationId ?? definition.name,
      groupId: definition.groupId,
      mode: p.mode,
      compressionThreshold: p.compressionThreshold,
      eventCodec: definition.valueCodec,
      flowName: definition.name,
      ...extra,
    });
  }

  /** One assigned partition's persistence, writing as `ownership.generation`. */
  async forPartition(ownership: CassandraPartitionOwnership): Promise<CassandraPartitionPersistence<S, V>> {
    const partition = { topic: ownership.topic, partition: ownership.partition };
    const { fencing, fenceEpoch } = this.settings;
    // 'lwt' compares fenceEpoch × 2³² + generation; 'timestamp' orders (fenceEpoch, generation) itself.
    const generation =
      ownership.generation === undefined || fencing === 'none'
        ? undefined
        : fencing === 'lwt'
          ? fenceEpoch * 2 ** 32 + ownership.generation
          : ownership.generation;
    if (ownership.localState && this.mode !== 'snapshots') throw new ConfigError(`local state keeps snapshots: mode '${this.mode}' is not 'snapshots'`);
    if (ownership.localState && fencing === 'none') throw new ConfigError("local state needs a generation fence: fencing 'lwt' or 'timestamp', not 'none'");
    const local = ownership.localState
      ? new CassandraLocalState<S, V>({
          dir: ownership.localState.dir,
          flow: this.flowName,
          groupId: this.groupId,
          topic: ownership.topic,
          partition: ownership.partition,
          table: `${this.settings.keyspace}.${this.settings.tables.snapshots}`,
          format: this.localFormat,
          onDemand: ownership.localState.onDemand,
          log: this.log,
        })
      : undefined;
    return new CassandraPartitionPersistence<S, V>({
      partition,
      mode: this.mode,
      ...(local ? { local, onDemand: ownership.localState!.onDemand, committed: ownership.committed } : {}),
      snapshots: this.snapshots?.withGeneration(generation),
      journal: this.journal?.withGeneration(generation),
      keys: this.keys,
      committer: ownership.committer,
      outputs: ownership.outputs,
      maxWritesPerBatch: this.settings.maxWritesPerBatch,
      recoveryParallelism: this.settings.maxConcurrentReads,
      recoveryBatchSize: this.settings.recoveryBatchSize,
      logger: this.log,
      onProgress: ownership.onProgress,
      metrics: this.metrics,
    });
  }

  /** Shuts the client down if the backend made it. */
  async close(): Promise<void> {
    if (!this.ownsClient) return;
    await shutdownClient(this.session.client, this.hosts);
  }
}

/**
 * Shuts a client down. cassandra-driver 4.10: when every node was down, the control connection
 * re-creates the Host of a contact point without shutting the old one down; that orphan's pool
 * survives client.shutdown() and reconnects forever (keeping the process alive). So every Host
 * this client ever had is shut down too.
 */
async function shutdownClient(client: Client, hosts: Set<unknown> | undefined): Promise<void> {
  await client.shutdown().catch(() => undefined);
  for (const host of hosts ?? []) {
    await (host as { shutdown?: (waitForPending: boolean) => Promise<void> }).shutdown?.(false)?.catch(() => undefined);
  }
}

/** Every Host object `client` announces (see close()). */
function trackHosts(client: Client): Set<unknown> {
  const hosts = new Set<unknown>();
  client.on('hostAdd', (h: unknown) => hosts.add(h));
  client.on('hostUp', (h: unknown) => hosts.add(h));
  return hosts;
}
