import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import type { Logger } from '../../core/logger';
import type { Router } from './router';

export interface HttpServer {
  /** The base URL this machine reaches it at (`http://127.0.0.1:9464`). */
  readonly url: string;
  /** The base URL other workers reach it at: `url`, or the host's name when it binds every interface. */
  readonly advertisedUrl: string;
  close(): Promise<void>;
}

/**
 * The worker's one HTTP server: `/metrics`, `/healthz`, `/readyz` and the live state queries, all
 * answered by `router`. Plain HTTP: the worker has no TLS setting of its own for it, so it binds
 * 127.0.0.1 unless told otherwise (`--metrics-host`, KFT_METRICS_HOST).
 */
export async function startHttpServer(router: Router, port: number, host: string, log?: Logger): Promise<HttpServer> {
  const server = http.createServer((req, res) => {
    router.handle(req.method ?? 'GET', req.url ?? '/').then(
      (reply) => {
        res.writeHead(reply.status, { 'content-type': reply.contentType, 'cache-control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : reply.body);
      },
      (err) => {
        log?.warn({ err }, 'an HTTP request failed');
        res.writeHead(500).end();
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  const unspecified = host === '0.0.0.0' || host === '::';
  // An unspecified bind address (every interface) is reached on this machine through loopback.
  const local = unspecified ? (host === '::' ? '[::1]' : '127.0.0.1') : bracketed(host);
  return {
    url: `http://${local}:${bound}`,
    advertisedUrl: `http://${unspecified ? os.hostname() : bracketed(host)}:${bound}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const bracketed = (host: string): string => (host.includes(':') ? `[${host}]` : host);
