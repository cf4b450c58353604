import net from 'node:net';
import { API_KEYS, FrameSplitter, KafkaCutProxy, requestHeader, responseCorrelationId } from '../../support/kafka-cut-proxy';

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

describe('FrameSplitter', () => {
  it('returns a frame split across chunks once, when complete — even split inside its size prefix', () => {
    const frame = request(API_KEYS.END_TXN, 7, Buffer.from('transaction'));
    const s = new FrameSplitter();
    const out: Buffer[] = [];
    for (let i = 0; i < frame.length; i++) out.push(...s.push(frame.subarray(i, i + 1)));
    expect(out).toEqual([frame]);
    expect(s.pending).toBe(0);
  });

  it('returns every frame of a chunk that holds several, and keeps the start of the next', () => {
    const a = request(API_KEYS.PRODUCE, 1, Buffer.from('records'));
    const b = request(API_KEYS.TXN_OFFSET_COMMIT, 2);
    const c = request(API_KEYS.END_TXN, 3, Buffer.from('x'));
    const s = new FrameSplitter();
    const all = Buffer.concat([a, b, c]);
    const cut = a.length + b.length + 6;
    expect(s.push(all.subarray(0, cut))).toEqual([a, b]);
    expect(s.pending).toBe(6);
    expect(s.push(all.subarray(cut))).toEqual([c]);
    expect(s.pending).toBe(0);
  });

  it('reads the request and response headers', () => {
    expect(requestHeader(request(26, 123456, Buffer.alloc(0), 2))).toEqual({ apiKey: 26, apiVersion: 2, correlationId: 123456 });
    expect(responseCorrelationId(response(-5))).toBe(-5);
    expect(() => requestHeader(Buffer.alloc(6))).toThrow(RangeError);
  });
});

/** A fake broker: answers every request with its correlation id; records what it received. */
async function fakeBroker(): Promise<{ port: number; received: number[]; close: () => Promise<void> }> {
  const received: number[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    const frames = new FrameSplitter();
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      for (const f of frames.push(chunk)) {
        const { correlationId } = requestHeader(f);
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

function client(port: number): Promise<{ socket: net.Socket; answers: number[]; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const answers: number[] = [];
    const frames = new FrameSplitter();
    const socket = net.connect({ host: '127.0.0.1', port }, () => resolve({ socket, answers, closed }));
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('error', reject);
    socket.on('data', (chunk: Buffer) => {
      for (const f of frames.push(chunk)) answers.push(responseCorrelationId(f));
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

describe('KafkaCutProxy', () => {
  it('cut: forwards the matching request, closes the client at once, and the broker side once answered', async () => {
    const broker = await fakeBroker();
    const proxy = new KafkaCutProxy({ host: '127.0.0.1', port: broker.port });
    await proxy.start();
    try {
      const c = await client(proxy.port);
      c.socket.write(request(API_KEYS.PRODUCE, 1));
      await until(() => c.answers.length === 1);
      const fired = proxy.arm({ apiKey: API_KEYS.END_TXN, action: 'cut' });
      // Two requests in one chunk, the second the trigger's.
      c.socket.write(Buffer.concat([request(API_KEYS.PRODUCE, 2), request(API_KEYS.END_TXN, 3)]));
      expect((await fired).header).toEqual({ apiKey: API_KEYS.END_TXN, apiVersion: 1, correlationId: 3 });
      await c.closed;
      await until(() => proxy.fired[0]!.answered);
      expect(broker.received).toEqual([1, 2, 3]);
      expect(c.answers).toEqual([1]);
      // Later connections pass.
      const d = await client(proxy.port);
      d.socket.write(request(API_KEYS.END_TXN, 4));
      await until(() => d.answers.length === 1);
      d.socket.destroy();
    } finally {
      await proxy.close();
      await broker.close();
    }
  });

  it('stall: forwards the matching request and holds the answers on its connection', async () => {
    const broker = await fakeBroker();
    const proxy = new KafkaCutProxy({ host: '127.0.0.1', port: broker.port });
    await proxy.start();
    try {
      const c = await client(proxy.port);
      void proxy.arm({ apiKey: API_KEYS.END_TXN, action: 'stall', match: (h) => h.correlationId === 6 });
      const frames = Buffer.concat([request(API_KEYS.END_TXN, 5), request(API_KEYS.END_TXN, 6)]);
      c.socket.write(frames.subarray(0, 9)); // split inside the first header
      c.socket.write(frames.subarray(9));
      await until(() => proxy.fired.length === 1 && proxy.fired[0]!.answered);
      expect(broker.received).toEqual([5, 6]);
      expect(c.socket.destroyed).toBe(false);
      expect(c.answers.length).toBeLessThanOrEqual(1); // 5's answer may have passed before 6 went up; 6's never
      expect(c.answers).not.toContain(6);
      c.socket.destroy();
    } finally {
      await proxy.close();
      await broker.close();
    }
  });

  it('drop: the matching request never reaches the broker, the client is closed; refuse closes new connections', async () => {
    const broker = await fakeBroker();
    const proxy = new KafkaCutProxy({ host: '127.0.0.1', port: broker.port });
    await proxy.start();
    try {
      const c = await client(proxy.port);
      void proxy.arm({ apiKey: API_KEYS.END_TXN, action: 'drop' });
      c.socket.write(Buffer.concat([request(API_KEYS.PRODUCE, 1), request(API_KEYS.END_TXN, 2), request(API_KEYS.PRODUCE, 3)]));
      await c.closed;
      await new Promise((r) => setTimeout(r, 50));
      expect(broker.received).toEqual([1]);
      expect(proxy.fired).toMatchObject([{ action: 'drop', answered: false, header: { correlationId: 2 } }]);

      proxy.refuse(true);
      const refused = await client(proxy.port);
      await refused.closed;
      expect(proxy.refused).toBe(1);
      proxy.refuse(false);
      const d = await client(proxy.port);
      d.socket.write(request(API_KEYS.END_TXN, 4));
      await until(() => d.answers.length === 1);
      d.socket.destroy();
    } finally {
      await proxy.close();
      await broker.close();
    }
  });
});
