// The chaos run's settings (command line, environment) and its clock and log line.
import path from 'node:path';
import { isQuick } from '../bench/lib/args';
import { productCommit } from '../bench/lib/results';

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
export const QUICK = isQuick();
export const SEED = Number(flag('seed') ?? process.env.CHAOS_SEED ?? Math.floor(Math.random() * 1e9));
export const FAULTS = Number(flag('faults') ?? (QUICK ? 30 : 120));
export const PHASE_MS = Number(flag('seconds') ?? (QUICK ? 45 : 600)) * 1000;
export const MODE_IDS = (flag('modes') ?? 'kafka,kafka-local,cassandra,cassandra-local').split(',').map((s) => s.trim()).filter(Boolean);
export const PORT_BASE = Number(flag('port-base') ?? process.env.CHAOS_PORT_BASE ?? 23_000);
export const KEEP_SERVERS = argv.includes('--keep-servers');
export const WRITE_BENCH = argv.includes('--write-results');
/**
 * All modes at once (one fault schedule over them all) instead of one mode after the other: the
 * quick run's default (CI time: ≈ 2.2 min instead of ≈ 3.2), `--sequential` to have it the other
 * way; a full run is sequential unless `--parallel` (at production load every mode needs the machine).
 */
export const PARALLEL = argv.includes('--parallel') || (QUICK && !argv.includes('--sequential'));
export const CASSANDRA_KILL9 = argv.includes('--cassandra-kill9');
const oneOf = <T extends string>(name: string, allowed: readonly T[]): T | undefined => {
  const v = flag(name);
  if (v !== undefined && !allowed.includes(v as T)) throw new Error(`--${name} must be one of ${allowed.join(', ')}, got ${v}`);
  return v as T | undefined;
};
/**
 * The Cassandra mode's fencing and layout (`--cassandra-fencing`, `--cassandra-layout`). The full
 * run takes the backend's setting for write-heavy flows, `'timestamp'` and `'by-partition'` (the
 * defaults, `'lwt'` and `'kafka-flow'`, do not keep up with 2,000 records/s on the 2-core machine:
 * docs/experiments/2026-12-05-cassandra-timestamp-fence.md); the quick run (CI) the defaults.
 */
export const CASSANDRA_FENCING = oneOf('cassandra-fencing', ['lwt', 'timestamp', 'none'] as const) ?? (QUICK ? undefined : 'timestamp');
export const CASSANDRA_LAYOUT = oneOf('cassandra-layout', ['kafka-flow', 'by-partition'] as const) ?? (QUICK ? undefined : 'by-partition');
/**
 * The flow's key timers (`--timers on|off`: the `pulse` timers and stateTtl, checked by the oracle).
 * On in the full run; off in the quick run (CI), whose Cassandra mode on the backend's defaults
 * ('lwt') fell behind twice with them beside the other test files on 2 cores.
 */
export const TIMERS = oneOf('timers', ['on', 'off'] as const) ?? (QUICK ? 'off' : 'on');
/** Only these fault kinds (comma-separated, e.g. to reproduce a finding); default every kind. */
export const FAULTS_ONLY = flag('faults-only')?.split(',').map((s) => s.trim()).filter(Boolean);
const positive = (name: string, fallback: number): number => {
  const v = Number(flag(name) ?? fallback);
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a positive integer, got ${flag(name)}`);
  return v;
};
// The load: the full run's defaults are a production load; the quick run (CI) stays small.
export const PARTITIONS = positive('partitions', QUICK ? 4 : 24);
export const KEYS = positive('keys', QUICK ? 40 : 50_000);
/** Records/s per mode. */
export const RATE = positive('rate', QUICK ? 25 : 2_000);
/**
 * The chaos flow's persist chunk (maxWritesPerTransaction / maxWritesPerBatch) and its bound on
 * outputs not landed (maxPendingOutputs): small, so that persists of several chunks and the
 * outputs' backpressure happen at any load.
 */
export const MAX_WRITES = positive('max-writes', 4);
export const MAX_PENDING_OUTPUTS = positive('max-pending-outputs', 8);
export const WORKERS = Number(flag('workers') ?? 2); // per mode, at the start
export const SESSION_TIMEOUT_MS = 6_000; // the broker's group.min.session.timeout.ms
export const PERSIST_EVERY_MS = 1_000;
/** The workers' KFT_WORKFLOW_REPORT_EVERY_MS (`--workflow-report-every <ms>`); unset: the default (every persistEvery). */
export const WORKFLOW_REPORT_EVERY_MS = flag('workflow-report-every') === undefined ? undefined : positive('workflow-report-every', 1);
/**
 * How long the workers may take to catch up once the producers stop (`--catch-up-seconds`): the
 * figure the goal judges (≤ 240 s). A longer window lets a mode that fell far behind finish, so
 * that the oracle judges its state rather than its backlog.
 */
export const CATCH_UP_MS = positive('catch-up-seconds', QUICK ? 120 : 240) * 1000;
/** Catching up ends early when no partition has moved for this long. */
export const CATCH_UP_IDLE_MS = 45_000;
/**
 * How many times (5 s apart) the oracle reads a mode's state before a read that keeps failing
 * counts every key absent: a minute, so that a Cassandra node still starting after a late kill -9
 * on a loaded CI machine is waited for rather than counted as every key lost.
 */
export const INSPECT_ATTEMPTS = 12;
export const SAMPLE_EVERY_MS = 1_000;
/** SIGTERM → SIGKILL: past the worker's own --shutdown-timeout (60 s, then it exits 1 itself). */
export const GRACE_MS = 75_000;
export const STARTUP_MS = Number(flag('startup-timeout') ?? (QUICK ? 90 : 150)) * 1000;
export const STATUS_EVERY_MS = 5_000;
/** After a server restart (or kill -9) is healed, its next fault waits this long. */
export const SERVER_REST_MS = 2 * SESSION_TIMEOUT_MS;

export const t0 = Date.now();
/**
 * The checkout's commit (and whether tracked files other than bench/results differ from it):
 * workers run the working tree.
 */
export const PRODUCT_COMMIT = productCommit(path.resolve(__dirname, '..')) ?? 'unknown';
export const rel = (at = Date.now()) => Number(((at - t0) / 1000).toFixed(1));
export const say = (line: string) => process.stdout.write(`[${rel().toFixed(1).padStart(6)} s] ${line}\n`);
