import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/**
 * `/metrics` for Prometheus: the flow's registry, followed by the Temporal SDK core's own metrics
 * (which core serves on a private loopback port we read through).
 */
export async function startMetricsServer(
  registry: Registry,
  port: number,
  temporalCoreMetricsUrl?: string,
  /** The address to bind: 127.0.0.1 (this machine only) unless told otherwise (`--metrics-host`, KFT_METRICS_HOST). */
  host = '127.0.0.1',
): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(async (req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end('see /metrics\n');
      return;
    }
    try {
      let body = await registry.metrics();
      if (temporalCoreMetricsUrl) {
        const core = await fetch(temporalCoreMetricsUrl).then((r) => r.text()).catch(() => '');
        body += `\n# Temporal SDK core\n${core}`;
      }
      res.writeHead(200, { 'content-type': registry.contentType }).end(body);
    } catch (err) {
      res.writeHead(500).end(String(err));
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  // An unspecified bind address (every interface) is reached on this machine through loopback.
  const shown = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${bound}/metrics`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
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
