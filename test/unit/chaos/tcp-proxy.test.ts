import fs from 'node:fs';
import net from 'node:net';
import { RequestFrames, TcpProxy } from '../../../chaos/tcp-proxy';

/** An echo server on an ephemeral port, and the proxy in front of it (also ephemeral). */
async function echoBehindProxy(): Promise<{ proxy: TcpProxy; close: () => Promise<void> }> {
  const server = net.createServer((s) => s.pipe(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  const proxy = new TcpProxy('echo', 0, { host: '127.0.0.1', port });
  await proxy.start();
  return {
    proxy,
    close: async () => {
      await proxy.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => resolve(s));
    s.once('error', reject);
  });
}

/** Sends `text` and resolves with the echo once it is all back, or undefined after `ms`. */
function roundTrip(s: net.Socket, text: string, ms = 2000): Promise<{ echo?: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    let got = '';
    const timer = setTimeout(() => {
      s.off('data', onData);
      resolve({ echo: undefined, ms: Date.now() - started });
    }, ms);
    const onData = (b: Buffer) => {
      got += b.toString();
      if (got.length >= text.length) {
        clearTimeout(timer);
        s.off('data', onData);
        resolve({ echo: got, ms: Date.now() - started });
      }
    };
    s.on('data', onData);
    s.write(text);
  });
}

const closed = (s: net.Socket) => new Promise<void>((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve())));

describe('chaos TcpProxy', () => {
  test('pass: forwards both ways', async () => {
    const { proxy, close } = await echoBehindProxy();
    try {
      const s = await connect(proxy.port);
      expect((await roundTrip(s, 'hello')).echo).toBe('hello');
      expect(proxy.stats.accepted).toBe(1);
      s.destroy();
    } finally {
      await close();
    }
  });

  test('drop: open connections are cut, new ones closed at once; pass again afterwards', async () => {
    const { proxy, close } = await echoBehindProxy();
    try {
      const s = await connect(proxy.port);
      expect((await roundTrip(s, 'a')).echo).toBe('a');
      proxy.setMode('drop');
      await closed(s);
      const t = await connect(proxy.port);
      await closed(t);
      expect(proxy.stats.dropped).toBe(2);
      proxy.setMode('pass');
      const u = await connect(proxy.port);
      expect((await roundTrip(u, 'back')).echo).toBe('back');
      u.destroy();
    } finally {
      await close();
    }
  });

  test('stall: nothing is forwarded until the mode changes, then everything held arrives in order', async () => {
    const { proxy, close } = await echoBehindProxy();
    try {
      const s = await connect(proxy.port);
      proxy.setMode('stall');
      const pending = roundTrip(s, 'held-data', 3000);
      await new Promise((r) => setTimeout(r, 400));
      const fresh = await connect(proxy.port); // accepted, but stalled too
      const freshTrip = roundTrip(fresh, 'new', 3000);
      await new Promise((r) => setTimeout(r, 400));
      proxy.setMode('pass');
      const r = await pending;
      expect(r.echo).toBe('held-data');
      expect(r.ms).toBeGreaterThanOrEqual(700);
      expect((await freshTrip).echo).toBe('new');
      s.destroy();
      fresh.destroy();
    } finally {
      await close();
    }
  });

  test('delay: each direction late by the delay, order kept', async () => {
    const { proxy, close } = await echoBehindProxy();
    try {
      const s = await connect(proxy.port);
      proxy.setMode('delay', 150);
      const r = await roundTrip(s, 'x'.repeat(10), 3000);
      expect(r.echo).toBe('x'.repeat(10));
      expect(r.ms).toBeGreaterThanOrEqual(290); // up and down
      const parts = await roundTrip(s, '123456789', 3000);
      expect(parts.echo).toBe('123456789');
      proxy.setMode('pass');
      const quick = await roundTrip(s, 'q');
      expect(quick.echo).toBe('q');
      s.destroy();
    } finally {
      await close();
    }
  });

  // One worker cut off: the proxy finds a connection's process through /proc (Linux only).
  (fs.existsSync('/proc/net/tcp') ? test : test.skip)('cut(pid): only that process\'s connections, open and new, stall until uncut, then get what was held', async () => {
    const { proxy, close } = await echoBehindProxy();
    try {
      const open = await connect(proxy.port);
      expect((await roundTrip(open, 'a')).echo).toBe('a');
      // Another process's cut leaves this one's connections alone.
      expect(proxy.cut(process.ppid)).toBe(0);
      expect((await roundTrip(open, 'b')).echo).toBe('b');
      proxy.uncut(process.ppid);
      expect(proxy.cut(process.pid)).toBe(1);
      expect((await roundTrip(open, 'held', 500)).echo).toBeUndefined();
      const fresh = await connect(proxy.port);
      expect((await roundTrip(fresh, 'new', 500)).echo).toBeUndefined();
      // A proxy-wide stall ending does not release a cut connection.
      proxy.setMode('stall');
      proxy.setMode('pass');
      expect((await roundTrip(fresh, '', 300)).echo).toBeUndefined();
      const late = roundTrip(open, '', 2000);
      proxy.uncut(process.pid);
      expect((await late).echo).toBe('held');
      expect((await roundTrip(fresh, 'xxxx')).echo).toBe('newxxxx');
      open.destroy();
      fresh.destroy();
    } finally {
      await close();
    }
  });
});


/** A Kafka request frame: INT32 size, INT16 api key, then `body` bytes. */
const frame = (apiKey: number, body: number): Buffer => {
  const b = Buffer.alloc(6 + body, 7);
  b.writeInt32BE(2 + body, 0);
  b.writeInt16BE(apiKey, 4);
  return b;
};

describe('chaos RequestFrames', () => {
  test('finds where each frame ends, whatever the chunks: split anywhere, several in one chunk', () => {
    const stream = Buffer.concat([frame(0, 30), frame(26, 5), frame(8, 0), frame(3, 12)]);
    for (const step of [1, 2, 5, 7, stream.length]) {
      const frames = new RequestFrames();
      const seen: Array<{ apiKey: number; at: number }> = [];
      for (let from = 0; from < stream.length; from += step) {
        for (const f of frames.scan(stream.subarray(from, from + step))) seen.push({ apiKey: f.apiKey, at: from + f.end });
      }
      expect(seen).toEqual([
        { apiKey: 0, at: 36 },
        { apiKey: 26, at: 47 },
        { apiKey: 8, at: 53 },
        { apiKey: 3, at: 71 },
      ]);
    }
  });
});

describe('chaos TcpProxy cutAfter', () => {
  test("forwards a marked request of the process's connections, then closes the client's before the answer", async () => {
    const received: Buffer[] = [];
    const server = net.createServer((s) => {
      s.on('data', (b) => {
        received.push(b);
        s.write(b); // an answer
      });
      s.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const proxy = new TcpProxy('kafka', 0, { host: '127.0.0.1', port: (server.address() as net.AddressInfo).port }, '127.0.0.1', true);
    await proxy.start();
    try {
      const s = await connect(proxy.port);
      // Other requests pass, answered.
      expect((await roundTrip(s, frame(0, 4).toString('latin1'))).echo).toBeDefined();
      proxy.cutAfter(process.pid, [26]);
      const gone = closed(s);
      const answered: Buffer[] = [];
      s.on('data', (b) => answered.push(b));
      s.write(Buffer.concat([frame(3, 2), frame(26, 3)]));
      await gone;
      expect(proxy.stopCutAfter(process.pid)).toBe(1);
      // The broker got the whole request (and answered it), the client none of the answer.
      await new Promise((r) => setTimeout(r, 100));
      expect(Buffer.concat(received).subarray(10).equals(Buffer.concat([frame(3, 2), frame(26, 3)]))).toBe(true);
      expect(answered).toEqual([]);
    } finally {
      await proxy.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
