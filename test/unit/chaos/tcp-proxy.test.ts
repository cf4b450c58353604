import fs from 'node:fs';
import net from 'node:net';
import { isEndTxnCommit, KAFKA_API, KafkaFrames, REQUEST_HEADER_BYTES, RESPONSE_HEADER_BYTES, requestHeader, responseCorrelationId, TcpProxy } from '../../../chaos/tcp-proxy';

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

describe('TcpProxy', () => {
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

/** A request frame: INT32 size, api key, version, correlation id, client id "t", then `body`. */
function request(apiKey: number, correlationId: number, body = Buffer.alloc(0), apiVersion = 1): Buffer {
  const header = Buffer.alloc(8 + 2 + 1);
  header.writeInt16BE(apiKey, 0);
  header.writeInt16BE(apiVersion, 2);
  header.writeInt32BE(correlationId, 4);
  header.writeInt16BE(1, 8);
  header.write('t', 10);
  const size = Buffer.alloc(4);
  size.writeInt32BE(header.length + body.length);
  return Buffer.concat([size, header, body]);
}

function response(correlationId: number, body = Buffer.from('ok')): Buffer {
  const frame = Buffer.alloc(8 + body.length);
  frame.writeInt32BE(4 + body.length, 0);
  frame.writeInt32BE(correlationId, 4);
  body.copy(frame, 8);
  return frame;
}

describe('KafkaFrames', () => {
  test('finds where each frame ends, whatever the chunks: split anywhere, several in one chunk', () => {
    const stream = Buffer.concat([frame(0, 30), frame(26, 5), frame(8, 0), frame(3, 12)]);
    for (const step of [1, 2, 5, 7, stream.length]) {
      const frames = new KafkaFrames(REQUEST_HEADER_BYTES);
      const seen: Array<{ apiKey: number; at: number }> = [];
      let apiKey = -1;
      for (let from = 0; from < stream.length; from += step) {
        for (const e of frames.scan(stream.subarray(from, from + step))) {
          if (e.kind === 'header') apiKey = e.header.readInt16BE(4);
          if (e.kind === 'end') seen.push({ apiKey, at: from + e.at });
        }
      }
      expect(seen).toEqual([
        { apiKey: 0, at: 36 },
        { apiKey: 26, at: 47 },
        { apiKey: 8, at: 53 },
        { apiKey: 3, at: 71 },
      ]);
    }
  });

  test('a frame split across chunks, even inside its size prefix: one start, one header, one end', () => {
    const f = request(KAFKA_API.END_TXN, 7, Buffer.from('transaction'));
    const frames = new KafkaFrames(REQUEST_HEADER_BYTES);
    const events: string[] = [];
    for (let i = 0; i < f.length; i++) {
      for (const e of frames.scan(f.subarray(i, i + 1))) events.push(`${e.kind}@${i + e.at}`);
    }
    expect(events).toEqual(['start@0', `header@${REQUEST_HEADER_BYTES}`, `end@${f.length}`]);
  });

  test('several frames in one chunk, the next started at its end', () => {
    const a = request(KAFKA_API.PRODUCE, 1, Buffer.from('records'));
    const b = request(KAFKA_API.TXN_OFFSET_COMMIT, 2);
    const c = request(KAFKA_API.END_TXN, 3, Buffer.from('x'));
    const all = Buffer.concat([a, b, c]);
    const cut = a.length + b.length + 6;
    const frames = new KafkaFrames(REQUEST_HEADER_BYTES);
    const headers = (chunk: Buffer) => frames.scan(chunk).flatMap((e) => (e.kind === 'header' ? [requestHeader(e.header).correlationId] : []));
    expect(headers(all.subarray(0, cut))).toEqual([1, 2]);
    expect(headers(all.subarray(cut))).toEqual([3]);
  });

  test('reads the request and response headers; EndTxn(commit) told from an abort', () => {
    expect(requestHeader(request(26, 123456, Buffer.alloc(0), 2))).toEqual({ apiKey: 26, apiVersion: 2, correlationId: 123456 });
    expect(responseCorrelationId(response(-5))).toBe(-5);
    expect(() => requestHeader(Buffer.alloc(6))).toThrow(RangeError);
    const endTxn = (committed: number, apiVersion: number) => request(KAFKA_API.END_TXN, 1, Buffer.from([0, 1, committed, ...(apiVersion >= 3 ? [0] : [])]), apiVersion);
    for (const v of [0, 2, 3]) {
      expect(isEndTxnCommit(requestHeader(endTxn(1, v)), endTxn(1, v))).toBe(true);
      expect(isEndTxnCommit(requestHeader(endTxn(0, v)), endTxn(0, v))).toBe(false);
    }
    expect(isEndTxnCommit(requestHeader(request(KAFKA_API.PRODUCE, 1, Buffer.from([1]))), request(KAFKA_API.PRODUCE, 1, Buffer.from([1])))).toBe(false);
  });
});

describe('TcpProxy cutAfter (a Kafka proxy, one process)', () => {
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

/** A fake broker: answers every request with its correlation id; records what it received. */
async function fakeBroker(): Promise<{ port: number; received: number[]; close: () => Promise<void> }> {
  const received: number[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    const frames = new KafkaFrames(REQUEST_HEADER_BYTES);
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      for (const e of frames.scan(chunk)) {
        if (e.kind !== 'header') continue;
        const { correlationId } = requestHeader(e.header);
        received.push(correlationId);
        // Answered a little later, as a broker that writes something first.
        setTimeout(() => socket.destroyed || socket.write(response(correlationId)), 20);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as net.AddressInfo).port,
    received,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function kafkaClient(port: number): Promise<{ socket: net.Socket; answers: number[]; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const answers: number[] = [];
    const frames = new KafkaFrames(RESPONSE_HEADER_BYTES);
    const socket = net.connect({ host: '127.0.0.1', port }, () => resolve({ socket, answers, closed: gone }));
    const gone = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('error', reject);
    socket.on('data', (chunk: Buffer) => {
      for (const e of frames.scan(chunk)) if (e.kind === 'header') answers.push(responseCorrelationId(e.header));
    });
  });
}

const until = async (what: () => boolean, ms = 2000) => {
  const deadline = Date.now() + ms;
  while (!what()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
};

/** A Kafka-following proxy in front of a fake broker for `test`, both closed after it. */
async function behindKafkaProxy(test: (proxy: TcpProxy, broker: Awaited<ReturnType<typeof fakeBroker>>) => Promise<void>): Promise<void> {
  const broker = await fakeBroker();
  const proxy = new TcpProxy('kafka', 0, { host: '127.0.0.1', port: broker.port }, '127.0.0.1', true);
  await proxy.start();
  try {
    await test(proxy, broker);
  } finally {
    await proxy.close();
    await broker.close();
  }
}

/** A new connection passes: its END_TXN is answered. */
async function passes(proxy: TcpProxy): Promise<void> {
  const d = await kafkaClient(proxy.port);
  d.socket.write(request(KAFKA_API.END_TXN, 4));
  await until(() => d.answers.length === 1);
  d.socket.destroy();
}

describe('TcpProxy triggers (a Kafka proxy, one-shot)', () => {
  it('cut: forwards the matching request, closes the client at once, and the broker side once answered', async () => {
    await behindKafkaProxy(async (proxy, broker) => {
      const c = await kafkaClient(proxy.port);
      c.socket.write(request(KAFKA_API.PRODUCE, 1));
      await until(() => c.answers.length === 1);
      const fired = proxy.arm({ apiKey: KAFKA_API.END_TXN, action: 'cut' });
      // Two requests in one chunk, the second the trigger's.
      c.socket.write(Buffer.concat([request(KAFKA_API.PRODUCE, 2), request(KAFKA_API.END_TXN, 3)]));
      expect((await fired).header).toEqual({ apiKey: KAFKA_API.END_TXN, apiVersion: 1, correlationId: 3 });
      await c.closed;
      await until(() => proxy.fired[0]!.answered);
      expect(broker.received).toEqual([1, 2, 3]);
      expect(c.answers).toEqual([1]);
      await passes(proxy); // later connections pass
    });
  });

  it('stall: forwards the matching request and holds the answers on its connection', async () => {
    await behindKafkaProxy(async (proxy, broker) => {
      const c = await kafkaClient(proxy.port);
      void proxy.arm({ apiKey: KAFKA_API.END_TXN, action: 'stall', match: (h) => h.correlationId === 6 });
      const frames = Buffer.concat([request(KAFKA_API.END_TXN, 5), request(KAFKA_API.END_TXN, 6)]);
      c.socket.write(frames.subarray(0, 9)); // split inside the first header
      c.socket.write(frames.subarray(9));
      await until(() => proxy.fired.length === 1 && proxy.fired[0]!.answered);
      expect(broker.received).toEqual([5, 6]);
      expect(c.socket.destroyed).toBe(false);
      expect(c.answers.length).toBeLessThanOrEqual(1); // 5's answer may have passed before 6 went up; 6's never
      expect(c.answers).not.toContain(6);
      c.socket.destroy();
    });
  });

  it('drop: the matching request never reaches the broker, the client is closed; refuse closes new connections', async () => {
    await behindKafkaProxy(async (proxy, broker) => {
      const c = await kafkaClient(proxy.port);
      void proxy.arm({ apiKey: KAFKA_API.END_TXN, action: 'drop' });
      c.socket.write(Buffer.concat([request(KAFKA_API.PRODUCE, 1), request(KAFKA_API.END_TXN, 2), request(KAFKA_API.PRODUCE, 3)]));
      await c.closed;
      await new Promise((r) => setTimeout(r, 50));
      expect(broker.received).toEqual([1]);
      expect(proxy.fired).toMatchObject([{ action: 'drop', answered: false, header: { correlationId: 2 } }]);

      proxy.refuse(true);
      const refused = await kafkaClient(proxy.port);
      await refused.closed;
      expect(proxy.stats.refused).toBe(1);
      proxy.refuse(false);
      await passes(proxy);
    });
  });
});

describe('TcpProxy sentRecently (the commit-cut fault picks a worker that is committing)', () => {
  test("answers by process and api key from the requests its open connections sent within the window", () =>
    behindKafkaProxy(async (proxy) => {
      const c = await kafkaClient(proxy.port);
      try {
        expect(proxy.sentRecently(process.pid, [KAFKA_API.END_TXN], 5_000)).toBe(false);
        c.socket.write(request(KAFKA_API.PRODUCE, 1));
        await until(() => c.answers.length === 1);
        expect(proxy.sentRecently(process.pid, [KAFKA_API.END_TXN, KAFKA_API.OFFSET_COMMIT], 5_000)).toBe(false);
        c.socket.write(request(KAFKA_API.END_TXN, 2));
        await until(() => c.answers.length === 2);
        expect(proxy.sentRecently(process.pid, [KAFKA_API.END_TXN, KAFKA_API.OFFSET_COMMIT], 5_000)).toBe(true);
        // Another process did not send it; and it is not recent within a window that ended before it.
        expect(proxy.sentRecently(1, [KAFKA_API.END_TXN], 5_000)).toBe(false);
        await new Promise((r) => setTimeout(r, 30));
        expect(proxy.sentRecently(process.pid, [KAFKA_API.END_TXN], 10)).toBe(false);
      } finally {
        c.socket.destroy();
      }
      // A closed connection counts no more.
      await c.closed;
      await until(() => !proxy.sentRecently(process.pid, [KAFKA_API.END_TXN], 5_000));
    }));
});
