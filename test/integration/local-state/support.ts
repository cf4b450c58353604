// What the local-state tests read off real workers: their log lines (the per-partition restore
// lines) and the cluster's state against a reference fold.
import type { FlowCluster, Worker } from '../orchestration/harness';

export interface Line {
  msg: string;
  level: number;
  snapshotTopic?: string;
  partition?: number;
  fromLocal?: number;
  fromTopic?: number;
  [k: string]: unknown;
}

export const lines = (cluster: FlowCluster, w: Worker): Line[] => cluster.logLines<Line>(w);

export interface Restored {
  fromLocal: number;
  fromTopic: number;
  /** The snapshot partition's range the restore read: [fromOffset, bound). */
  fromOffset?: string;
  bound?: string;
}

/** Each partition's "restored <topic>-<p>: N from local state, M from the topic, K ms" line, last one per partition. */
export function restored(cluster: FlowCluster, w: Worker, snapshotTopic: string): Map<number, Restored> {
  const out = new Map<number, Restored>();
  for (const l of lines(cluster, w)) {
    const m = /^restored (.+)-(\d+): (\d+) from local state, (\d+) from the topic, \d+ ms$/.exec(l.msg);
    if (m && m[1] === snapshotTopic) {
      out.set(Number(m[2]), {
        fromLocal: Number(m[3]),
        fromTopic: Number(m[4]),
        fromOffset: typeof l.fromOffset === 'string' ? l.fromOffset : undefined,
        bound: typeof l.bound === 'string' ? l.bound : undefined,
      });
    }
  }
  return out;
}

export async function settled(cluster: FlowCluster, owners: number): Promise<void> {
  await cluster.untilRunningOn(owners, `running on ${owners}`, 90_000);
  await cluster.untilCaughtUp('caught up');
}

export async function exact(cluster: FlowCluster): Promise<void> {
  expect(await cluster.persisted()).toEqual(await cluster.reference());
}


/** kill -9 of `w` at a random moment (0.3–1 s) while `records` more are produced; resolves once it is dead and they are acked. */
export async function killUnderLoad(cluster: FlowCluster, w: Worker, records: number): Promise<void> {
  const load = cluster.produce(records);
  await new Promise((r) => setTimeout(r, 300 + Math.floor(Math.random() * 700)));
  w.process.kill('SIGKILL');
  await w.exited;
  await load;
}
