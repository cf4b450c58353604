import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Handler } from '../http/router';

/**
 * `/metrics` for Prometheus: the flow's registry, followed by the Temporal SDK core's own metrics
 * (which core serves on a private loopback port we read through).
 */
export function metricsHandler(registry: Registry, temporalCoreMetricsUrl?: string): Handler {
  return async () => {
    let body = await registry.metrics();
    if (temporalCoreMetricsUrl) {
      const core = await fetch(temporalCoreMetricsUrl).then((r) => r.text()).catch(() => '');
      body += `\n# Temporal SDK core\n${core}`;
    }
    return { status: 200, body, contentType: registry.contentType };
  };
}

/** A free loopback port, for Temporal core's metrics endpoint. */
export async function freePort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
