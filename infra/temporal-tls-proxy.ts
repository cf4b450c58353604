/**
 * A TLS endpoint in front of the Temporal dev server, which has no TLS options of its own
 * (`temporal server start-dev` in CLI 1.9.1 has no TLS flags). It terminates TLS with the local
 * CA's server certificate and forwards each gRPC call (HTTP/2 stream: headers, messages, trailers)
 * to the dev server's plaintext port. A call is let through only when the client presented a
 * certificate signed by the local CA (mTLS) or sent `authorization: Bearer <API key>` (Temporal
 * Cloud's API-key scheme); any other call is answered UNAUTHENTICATED, as Temporal Cloud does.
 * For local tests of TEMPORAL_TLS_* and TEMPORAL_API_KEY only; not a production component.
 *
 * Run by `infra` as its own process: `node bin/run-ts.js infra/temporal-tls-proxy.ts <config.json>`.
 */
import fs from 'node:fs';
import http2 from 'node:http2';
import type { TLSSocket } from 'node:tls';

export interface TemporalTlsProxyOptions {
  host: string;
  port: number;
  /** The plaintext Temporal frontend, host:port. */
  upstream: string;
  key: Buffer | string;
  cert: Buffer | string;
  /** CA of accepted client certificates. */
  ca: Buffer | string;
  /** The accepted API key; undefined: client certificates only. */
  apiKey?: string;
}

const { HTTP2_HEADER_AUTHORIZATION, NGHTTP2_CANCEL, NGHTTP2_INTERNAL_ERROR } = http2.constants;
const GRPC_UNAUTHENTICATED = '16';
const GRPC_UNAVAILABLE = '14';

export function startTemporalTlsProxy(o: TemporalTlsProxyOptions): Promise<http2.Http2SecureServer> {
  let session: http2.ClientHttp2Session | undefined;
  const upstream = () => {
    if (!session || session.closed || session.destroyed) {
      const s = http2.connect(`http://${o.upstream}`);
      s.on('error', () => undefined);
      s.on('close', () => {
        if (session === s) session = undefined;
      });
      session = s;
    }
    return session;
  };
  const server = http2.createSecureServer({ key: o.key, cert: o.cert, ca: o.ca, requestCert: true, rejectUnauthorized: false, ALPNProtocols: ['h2'] });
  server.on('stream', (stream, headers) => {
    stream.on('error', () => undefined);
    const socket = stream.session?.socket as TLSSocket | undefined;
    const certified = socket?.authorized === true;
    const auth = headers[HTTP2_HEADER_AUTHORIZATION];
    const keyed = o.apiKey !== undefined && auth === `Bearer ${o.apiKey}`;
    if (!certified && !keyed) {
      const why = auth !== undefined ? 'invalid API key' : 'a client certificate signed by the local CA or an API key is required';
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': GRPC_UNAUTHENTICATED, 'grpc-message': encodeURIComponent(why) }, { endStream: true });
      return;
    }
    const forwarded: http2.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(headers)) {
      if (name === ':scheme' || name === HTTP2_HEADER_AUTHORIZATION) continue;
      forwarded[name] = value;
    }
    let call: http2.ClientHttp2Stream;
    try {
      call = upstream().request(forwarded);
    } catch {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': GRPC_UNAVAILABLE, 'grpc-message': 'upstream%20unavailable' }, { endStream: true });
      return;
    }
    let trailers: http2.OutgoingHttpHeaders = {};
    call.on('response', (responseHeaders, flags) => {
      if (stream.closed) return;
      if ((flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0) {
        stream.respond(responseHeaders, { endStream: true });
        return;
      }
      stream.respond(responseHeaders, { waitForTrailers: true });
      call.pipe(stream);
    });
    call.on('trailers', (t) => {
      trailers = t;
    });
    stream.on('wantTrailers', () => stream.sendTrailers(trailers));
    call.on('error', () => {
      if (!stream.closed) stream.close(NGHTTP2_INTERNAL_ERROR);
    });
    stream.pipe(call);
    stream.on('close', () => {
      if (!call.closed) call.close(NGHTTP2_CANCEL);
    });
  });
  server.on('sessionError', () => undefined);
  server.on('tlsClientError', () => undefined);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => resolve(server));
  });
}

/** The process `infra` runs: the options come from a JSON file (paths to PEM files, the API key file). */
if (process.argv[1] === __filename) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: temporal-tls-proxy <config.json>\n');
    process.exit(2);
  }
  const c = JSON.parse(fs.readFileSync(file, 'utf8')) as { host: string; port: number; upstream: string; key: string; cert: string; ca: string; apiKeyFile?: string };
  startTemporalTlsProxy({
    host: c.host,
    port: c.port,
    upstream: c.upstream,
    key: fs.readFileSync(c.key),
    cert: fs.readFileSync(c.cert),
    ca: fs.readFileSync(c.ca),
    apiKey: c.apiKeyFile ? fs.readFileSync(c.apiKeyFile, 'utf8').replace(/\r?\n$/, '') : undefined,
  }).then(
    () => process.stdout.write(`temporal TLS endpoint on ${c.host}:${c.port} -> ${c.upstream}\n`),
    (err: unknown) => {
      process.stderr.write(`temporal TLS endpoint failed: ${String(err)}\n`);
      process.exit(1);
    },
  );
}
