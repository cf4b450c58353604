// The local Temporal dev server (`npm run infra:up`: `temporal server start-dev`) as a measured
// process: its pid (for /proc CPU) and its own Prometheus endpoint, which start-dev serves on a
// port it picks at random — service_requests per gRPC operation (frontend, history, matching) and
// persistence_requests per store operation, the server's side of what the workers ask of it.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { localServerPid } from './cpu';
import { scrapeMetrics } from './prometheus';

const SERVICE_REQUESTS = new Set(['service_requests']);

/** The local Temporal server's pid (its infra pid file), or undefined. */
export function localTemporalPid(packageRoot: string): number | undefined {
  return localServerPid(packageRoot, 'temporal');
}

/** The TCP ports a process listens on, from /proc (Linux), IPv4 and IPv6. */
export function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode; st 0A = LISTEN
      if (f.length < 10 || f[3] !== '0A' || !inodes.has(f[9]!)) continue;
      ports.add(Number.parseInt(f[1]!.split(':')[1]!, 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}

/**
 * The URL of the dev server's Prometheus endpoint: BENCH_TEMPORAL_METRICS_URL, else the one port
 * of the process that answers /metrics with service_requests; undefined if none does.
 */
export async function temporalMetricsUrl(pid: number | undefined): Promise<string | undefined> {
  if (process.env.BENCH_TEMPORAL_METRICS_URL) return process.env.BENCH_TEMPORAL_METRICS_URL;
  if (pid === undefined) return undefined;
  // All ports at once, each given seconds: a loaded server answers slowly, a gRPC port not at all.
  const urls = listeningPorts(pid).map((port) => `http://127.0.0.1:${port}/metrics`);
  const found = await Promise.all(urls.map((url) => scrapeMetrics(url, 10_000, SERVICE_REQUESTS).then((samples) => samples.length > 0, () => false)));
  return urls.find((_, i) => found[i]);
}
