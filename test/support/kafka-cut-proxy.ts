/**
 * A loopback TCP proxy in front of one Kafka broker that reads the client's request frames
 * (INT32 size, then request header: INT16 api_key, INT16 api_version, INT32 correlation_id, …)
 * and, once armed, does something to the first request that matches:
 *   cut    forward the request, close the client's connection at once, and keep the broker's
 *          until the broker answered it (so the broker did handle it) — the client never learns
 *          the answer;
 *   stall  forward the request and hold every answer on that connection from then on, until the
 *          client gives up and closes it (a request timeout);
 *   drop   close the client's connection without forwarding the request (the broker never sees
 *          it; what went up before it still does), then the broker's.
 * Every other request and connection passes as is — unless `refuse(true)`: then every new
 * connection is closed as soon as it is accepted (the broker unreachable), until `refuse(false)`.
 *
 * The broker advertises its own address in metadata: a kafkajs client bootstrapped through the
 * proxy would connect to the broker directly afterwards. `socketFactory()` sends every connection
 * of a kafkajs client to the proxy instead, whatever broker address it asks for (plaintext
 * listeners: TLS is not proxied).
 */
import net from 'node:net';
import type { ISocketFactory } from 'kafkajs';
import { type KafkaClient, newKafka } from '../../kafka/client';

export const API_KEYS = { PRODUCE: 0, FIND_COORDINATOR: 10, INIT_PRODUCER_ID: 22, END_TXN: 26, TXN_OFFSET_COMMIT: 28 } as const;

/** The fixed fields at the start of a request header (every version has them). */
export interface RequestHeader {
  apiKey: number;
  apiVersion: number;
  correlationId: number;
}

/**
 * Splits a byte stream into Kafka frames (INT32 size + that many bytes), whatever the TCP chunks:
 * a frame split across chunks comes out once it is complete, several frames in one chunk each.
 */
export class FrameSplitter {
  private buffered: Buffer = Buffer.alloc(0);

  /** The frames `chunk` completes, each with its 4-byte size prefix, in order. */
  push(chunk: Buffer): Buffer[] {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    const frames: Buffer[] = [];
    let at = 0;
    while (this.buffered.length - at >= 4) {
      const size = this.buffered.readInt32BE(at);
      if (size < 0) throw new RangeError(`negative Kafka frame size ${size}`);
      if (this.buffered.length - at - 4 < size) break;
      frames.push(this.buffered.subarray(at, at + 4 + size));
      at += 4 + size;
    }
    this.buffered = this.buffered.subarray(at);
    return frames;
  }

  /** Bytes of an incomplete frame held back. */
  get pending(): number {
    return this.buffered.length;
  }
}

/** A request frame's (with its size prefix) api key, version and correlation id. */
export function requestHeader(frame: Buffer): RequestHeader {
  if (frame.length < 12) throw new RangeError(`a request frame of ${frame.length} bytes has no header`);
  return { apiKey: frame.readInt16BE(4), apiVersion: frame.readInt16BE(6), correlationId: frame.readInt32BE(8) };
}

/** A response frame's (with its size prefix) correlation id. */
export function responseCorrelationId(frame: Buffer): number {
  if (frame.length < 8) throw new RangeError(`a response frame of ${frame.length} bytes has no header`);
  return frame.readInt32BE(4);
}

/**
 * Whether a request is EndTxn with `committed` true (a commit, not an abort). Versions 0–2 (what
 * kafkajs sends) end with that BOOLEAN; flexible ones (3+) with it and then an empty tag buffer.
 */
export function isEndTxnCommit(header: RequestHeader, frame: Buffer): boolean {
  if (header.apiKey !== API_KEYS.END_TXN) return false;
  return frame[frame.length - (header.apiVersion >= 3 ? 2 : 1)] === 1;
}

export type CutAction = 'cut' | 'stall' | 'drop';

export interface Trigger {
  apiKey: number;
  action: CutAction;
  /** Further condition on the request (its header and whole frame); default: any request of `apiKey`. */
  match?: (header: RequestHeader, frame: Buffer) => boolean;
}

/** What the proxy did when a trigger fired. */
export interface Fired {
  header: RequestHeader;
  action: CutAction;
  /** Whether the broker answered the request (never, for `drop`). */
  answered: boolean;
}

interface Pipe {
  client: net.Socket;
  upstream: net.Socket;
  requests: FrameSplitter;
  responses: FrameSplitter;
  /** The trigger that fired on this connection: its answers are not forwarded any more. */
  fired?: Fired;
}

export class KafkaCutProxy {
  private server?: net.Server;
  private readonly pipes = new Set<Pipe>();
  private armed: Array<{ trigger: Trigger; fired: (f: Fired) => void }> = [];
  /** Every trigger that fired, in order. */
  readonly fired: Fired[] = [];
  accepted = 0;
  /** Connections closed at once because the proxy refused them. */
  refused = 0;
  private refusing = false;

  constructor(readonly target: { host: string; port: number }) {}

  /** A started proxy in front of `client`'s first broker. */
  static async before(client: KafkaClient): Promise<KafkaCutProxy> {
    const [host, port] = client.brokers[0]!.split(':');
    const proxy = new KafkaCutProxy({ host: host!, port: Number(port) });
    await proxy.start();
    return proxy;
  }

  get port(): number {
    const a = this.server?.address();
    if (!a || typeof a !== 'object') throw new Error('the proxy is not listening');
    return a.port;
  }

  async start(): Promise<void> {
    const server = net.createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
  }

  async close(): Promise<void> {
    for (const p of this.pipes) this.destroy(p);
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /**
   * Arms a one-shot trigger: the next matching request (on any connection) gets `action`.
   * Resolves when it fired (the request forwarded or dropped, the client's side cut or stalled).
   */
  arm(trigger: Trigger): Promise<Fired> {
    return new Promise((fired) => this.armed.push({ trigger, fired }));
  }

  /** While on, every new connection is closed as soon as it is accepted; open ones are left alone. */
  refuse(on: boolean): void {
    this.refusing = on;
  }

  /** A kafkajs socket factory that connects every broker address to this proxy. */
  socketFactory(): ISocketFactory {
    return ({ onConnect }) => net.connect({ host: '127.0.0.1', port: this.port }, onConnect);
  }

  private accept(client: net.Socket): void {
    this.accepted++;
    if (this.refusing) {
      this.refused++;
      client.destroy();
      return;
    }
    client.setNoDelay(true);
    const upstream = net.connect({ host: this.target.host, port: this.target.port });
    upstream.setNoDelay(true);
    const pipe: Pipe = { client, upstream, requests: new FrameSplitter(), responses: new FrameSplitter() };
    this.pipes.add(pipe);
    client.on('error', () => this.destroy(pipe));
    upstream.on('error', () => this.destroy(pipe));
    // A cut pipe outlives its client until the broker answered; otherwise either side ends both.
    client.on('close', () => {
      if (pipe.fired?.action !== 'cut') this.destroy(pipe);
    });
    upstream.on('close', () => this.destroy(pipe));
    client.on('data', (chunk: Buffer) => this.up(pipe, chunk));
    upstream.on('data', (chunk: Buffer) => this.down(pipe, chunk));
  }

  private up(pipe: Pipe, chunk: Buffer): void {
    if (pipe.fired?.action === 'cut') return; // the client's side is gone: nothing more goes up
    for (const frame of pipe.requests.push(chunk)) {
      const header = pipe.fired ? undefined : requestHeader(frame);
      const i = header ? this.armed.findIndex(({ trigger }) => trigger.apiKey === header.apiKey && (trigger.match?.(header, frame) ?? true)) : -1;
      if (!header || i < 0) {
        pipe.upstream.write(frame);
        continue;
      }
      const [{ trigger, fired }] = this.armed.splice(i, 1) as [(typeof this.armed)[number]];
      const f: Fired = { header, action: trigger.action, answered: false };
      this.fired.push(f);
      pipe.fired = f;
      if (trigger.action === 'drop') {
        // What went up before it still reaches the broker.
        this.pipes.delete(pipe);
        pipe.client.destroy();
        pipe.upstream.end();
        setTimeout(() => pipe.upstream.destroy(), 5_000).unref();
        fired(f);
        return;
      }
      pipe.upstream.write(frame);
      if (trigger.action === 'cut') {
        pipe.client.destroy();
        // Should the broker never answer, its side goes too, eventually.
        setTimeout(() => this.destroy(pipe), 30_000).unref();
      }
      fired(f);
      if (trigger.action === 'cut') return;
    }
  }

  /** Answers, frame by frame (so that holding them can start between two): forwarded unless held. */
  private down(pipe: Pipe, chunk: Buffer): void {
    for (const frame of pipe.responses.push(chunk)) {
      const f = pipe.fired;
      if (!f) {
        pipe.client.write(frame);
        continue;
      }
      if (responseCorrelationId(frame) !== f.header.correlationId) continue;
      f.answered = true;
      if (f.action === 'cut') {
        this.destroy(pipe);
        return;
      }
    }
  }

  private destroy(p: Pipe): void {
    if (!this.pipes.delete(p)) return;
    p.client.destroy();
    p.upstream.destroy();
  }
}

/**
 * `client` with its kafkajs instance (producers, group consumers, admin) connected through
 * `proxy`; the group-less readers built on `client.brokers` still connect directly.
 */
export function proxiedClient(client: KafkaClient, proxy: KafkaCutProxy, options: { requestTimeout?: number } = {}): KafkaClient {
  const kafka = newKafka({
    brokers: [`127.0.0.1:${proxy.port}`],
    clientId: `${client.clientId}-proxied`,
    logLevel: client.logLevel,
    logCreator: client.logCreator,
    socketFactory: proxy.socketFactory(),
    ...client.connection,
    ...(options.requestTimeout !== undefined ? { requestTimeout: options.requestTimeout } : {}),
  });
  return { ...client, kafka };
}
