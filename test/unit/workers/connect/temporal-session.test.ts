// Telling a security mismatch from a server that is merely not answering, when grpc-js says only
// "Failed to connect before the deadline": loopback servers that answer an HTTP/2 preface as a
// plaintext gRPC server, as a TLS server (an alert, or Node's: closing), by closing (a proxy with
// nothing behind it), or not at all (stalled).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { probeHttp2, probeTls } from '../../../../config/net';
import { temporalSessionFailure } from '../../../../workers/connect/temporal-tls';

type Behaviour = 'settings' | 'alert' | 'close' | 'silent' | 'node-tls';

/** A self-signed key and certificate made by openssl (as the security tests make theirs). */
function selfSigned(): { key: Buffer; cert: Buffer } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-tls-'));
  try {
    const [k, c] = [path.join(dir, 'key.pem'), path.join(dir, 'cert.pem')];
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', k, '-out', c, '-days', '1', '-subj', '/CN=test'], { stdio: 'ignore' });
    return { key: fs.readFileSync(k), cert: fs.readFileSync(c) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function server(behaviour: Behaviour): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  if (behaviour === 'node-tls') {
    // Node's TLS server: a plaintext client's bytes are not a ClientHello, and it closes without a byte.
    const t = tls.createServer(selfSigned(), (socket) => socket.end());
    t.on('connection', (socket) => sockets.add(socket));
    t.on('tlsClientError', () => {});
    await new Promise<void>((resolve) => t.listen(0, '127.0.0.1', resolve));
    return {
      port: (t.address() as net.AddressInfo).port,
      close: () =>
        new Promise<void>((resolve) => {
          for (const socket of sockets) socket.destroy();
          t.close(() => resolve());
        }),
    };
  }
  const s = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('data', () => {
      if (behaviour === 'settings') socket.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]));
      else if (behaviour === 'alert') socket.write(Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46, 0, 0]));
      else if (behaviour === 'close') socket.end();
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        s.close(() => resolve());
      }),
  };
}

const deadline = new Error('14 UNAVAILABLE: Failed to connect before the deadline');

describe('probeHttp2', () => {
  it.each<[Behaviour, string]>([
    ['settings', 'h2'],
    ['alert', 'other'],
    ['close', 'closed'],
    ['node-tls', 'closed'],
    ['silent', 'silent'],
  ])('a server that answers with %s: %s', async (behaviour, expected) => {
    const s = await server(behaviour);
    try {
      expect(await probeHttp2('127.0.0.1', s.port, 500)).toBe(expected);
    } finally {
      await s.close();
    }
  });

  it('no server: refused', async () => {
    const s = await server('silent');
    await s.close();
    expect(await probeHttp2('127.0.0.1', s.port, 500)).toBe('refused');
  });
});

describe('probeTls', () => {
  it.each<[Behaviour, string]>([
    ['node-tls', 'tls'],
    ['alert', 'tls'],
    ['close', 'closed'],
    ['silent', 'silent'],
  ])('a server that answers with %s: %s', async (behaviour, expected) => {
    const s = await server(behaviour);
    try {
      expect(await probeTls('127.0.0.1', s.port, 500)).toBe(expected);
    } finally {
      await s.close();
    }
  });
});

describe('temporalSessionFailure', () => {
  async function diagnose(behaviour: Behaviour, tls: boolean) {
    const s = await server(behaviour);
    try {
      return await temporalSessionFailure({ host: '127.0.0.1', port: s.port }, `127.0.0.1:${s.port}`, tls ? { tls: {} } as never : undefined, deadline);
    } finally {
      await s.close();
    }
  }

  it('a plaintext client and a TLS server (an alert, or closed and answering a handshake): a mismatch naming TEMPORAL_TLS', async () => {
    expect((await diagnose('alert', false))?.message).toMatch(/expect TLS/);
    expect((await diagnose('node-tls', false))?.message).toMatch(/expect TLS/);
  });

  it('a port that closes every connection without a TLS answer either (a proxy with nothing behind it) is not a mismatch: unreachable', async () => {
    expect(await diagnose('close', false)).toBeUndefined();
    expect(await diagnose('close', true)).toBeUndefined();
  });

  it('a TLS client and a server that is plaintext gRPC or does not take our TLS: a mismatch', async () => {
    expect((await diagnose('settings', true))?.message).toMatch(/TLS session failed/);
    expect((await diagnose('alert', true))?.message).toMatch(/TLS session failed/);
  });

  it('a server that accepts and says nothing (stalled, cut off) is not a mismatch: unreachable', async () => {
    expect(await diagnose('silent', false)).toBeUndefined();
    expect(await diagnose('silent', true)).toBeUndefined();
  });

  it('a plaintext gRPC server answering a plaintext client: the failure was passing, unreachable', async () => {
    expect(await diagnose('settings', false)).toBeUndefined();
  });
});
