import net from 'node:net';
import tls from 'node:tls';

/**
 * True when something accepts TCP connections on host:port. Shared by the worker (a fast
 * "no broker answers" check before kafkajs's retries) and `infra` (is a server up?).
 */
export function portOpen(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * What a server says to an HTTP/2 client preface: `h2` (a SETTINGS frame: plaintext gRPC), `other`
 * (other bytes, e.g. a TLS alert), `closed` (it closed the connection without a byte: a TLS server
 * that drops a plaintext client, or a proxy with nothing behind it), `silent` (nothing in time),
 * `refused` (no TCP connection).
 */
export type Http2Answer = 'h2' | 'other' | 'closed' | 'silent' | 'refused';

const HTTP2_PREFACE = Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])]);

/**
 * Sends the HTTP/2 client preface (and an empty SETTINGS frame) in plaintext and reads the first
 * answer. A plaintext gRPC server answers with its SETTINGS frame; a TLS server with an alert or by
 * closing the connection; a server that accepts connections but is stalled (or cut off behind a
 * proxy) says nothing. Tells a security mismatch from a server that is merely not answering.
 */
export function probeHttp2(host: string, port: number, timeoutMs = 2000): Promise<Http2Answer> {
  return new Promise((resolve) => {
    let connected = false;
    let settled = false;
    const socket = net.connect({ host, port });
    const done = (answer: Http2Answer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done(connected ? 'silent' : 'refused'), timeoutMs);
    socket.once('connect', () => {
      connected = true;
      socket.write(HTTP2_PREFACE);
    });
    let got = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      // A frame header is 9 bytes: length (3), type (1: SETTINGS is 4), flags, stream id.
      if (got.length >= 9) done(got[3] === 4 ? 'h2' : 'other');
    });
    const ended = () => done(!connected ? 'refused' : got.length > 0 ? 'other' : 'closed');
    socket.once('end', ended);
    socket.once('error', ended);
  });
}

/** True when any of `addresses` accepts a TCP connection (a broker list's reachability). */
export async function anyPortOpen(addresses: ReadonlyArray<{ host: string; port: number }>, timeoutMs = 1000): Promise<boolean> {
  const answers = await Promise.all(addresses.map((a) => portOpen(a.host, a.port, timeoutMs)));
  return answers.some(Boolean);
}

/** What a server says to a TLS ClientHello: `tls` (a TLS answer: a handshake, or an alert), `closed` (it closed without one), `silent`, `refused`. */
export type TlsAnswer = 'tls' | 'closed' | 'silent' | 'refused';

/**
 * Starts a TLS handshake (no certificate checked: only whether the server speaks TLS at all). Tells
 * a TLS server that closes a plaintext client's connection without a byte from a proxy or load
 * balancer that closes every connection (nothing behind it): both look alike to probeHttp2.
 */
export function probeTls(host: string, port: number, timeoutMs = 2000): Promise<TlsAnswer> {
  return new Promise((resolve) => {
    let connected = false;
    let settled = false;
    const socket = tls.connect({ host, port, rejectUnauthorized: false, ALPNProtocols: ['h2'], ...(net.isIP(host) ? {} : { servername: host }) });
    const done = (answer: TlsAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done(connected ? 'silent' : 'refused'), timeoutMs);
    socket.once('connect', () => {
      connected = true;
    });
    socket.once('secureConnect', () => done('tls'));
    socket.once('error', (err: NodeJS.ErrnoException) => {
      if (!connected) return done('refused');
      // An alert or a protocol error from the server's side is a TLS answer; a reset or a close before any is not.
      done(/^ERR_SSL_|^ERR_TLS_/.test(err.code ?? '') || /alert|ssl|tls handshake|certificate/i.test(err.message) ? 'tls' : 'closed');
    });
    socket.once('end', () => done(connected ? 'closed' : 'refused'));
  });
}
