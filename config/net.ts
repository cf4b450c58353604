import net from 'node:net';

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

/** What a server says to an HTTP/2 client preface: `h2` (a SETTINGS frame: plaintext gRPC), `other` (anything else, or it closed: TLS), `silent` (nothing in time), `refused` (no TCP connection). */
export type Http2Answer = 'h2' | 'other' | 'silent' | 'refused';

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
    socket.once('end', () => done(connected ? 'other' : 'refused'));
    socket.once('error', () => done(connected ? 'other' : 'refused'));
  });
}

/** True when any of `addresses` accepts a TCP connection (a broker list's reachability). */
export async function anyPortOpen(addresses: ReadonlyArray<{ host: string; port: number }>, timeoutMs = 1000): Promise<boolean> {
  const answers = await Promise.all(addresses.map((a) => portOpen(a.host, a.port, timeoutMs)));
  return answers.some(Boolean);
}
