import fs from 'node:fs';
import net from 'node:net';

/**
 * A loopback TCP proxy for network faults, the chaos suite's and the tests': every connection to
 * `listenPort` (0: any free port) is forwarded to `target`. Modes, switchable at any time:
 *   pass   forward as is;
 *   drop   destroy every open connection, and every new one as soon as it is accepted;
 *   stall  stop forwarding (both directions, open and new connections; sockets paused, so
 *          TCP back-pressure builds), then deliver everything held when the mode changes;
 *   delay  forward each chunk `delayMs` late (order kept per direction).
 * Besides the mode, `cut(pid)` stalls only the connections of one client process (found through
 * /proc, Linux), open and new, until `uncut(pid)`: one worker cut off while the others go on; and
 * `refuse(true)` closes every new connection as soon as it is accepted (the server unreachable),
 * leaving the open ones alone, until `refuse(false)`.
 *
 * A proxy in front of a Kafka broker (`kafkaRequests`) also follows the request and response
 * frames of each connection (INT32 size, then the header: INT16 api key, INT16 api version, INT32
 * correlation id; a response's: INT32 correlation id), copying only headers, and acts on requests
 * that match a trigger — once the whole request is in (a request a trigger may apply to is held
 * until it is complete; every other byte streams as it comes):
 *   cut    forward the request, close the client's connection at once, and keep the broker's
 *          until the broker answered it (so the broker did handle it) — the client never learns
 *          the answer: an ambiguous commit when the request is EndTxn or OffsetCommit;
 *   stall  forward the request and hold every answer on that connection from then on, until the
 *          client gives up and closes it (a request timeout);
 *   drop   close the client's connection without forwarding the request (the broker never sees
 *          it; what went up before it still does), then the broker's.
 * A trigger is one-shot on any connection (`arm`, the tests'), or standing for one client
 * process's connections (`cutAfter(pid, apiKeys)` … `stopCutAfter(pid)`, the chaos suite's).
 */
export type ProxyMode = 'pass' | 'drop' | 'stall' | 'delay';

export interface ProxyStats {
  accepted: number;
  /** Connections closed by the proxy: by `drop`, a cut or dropped request, or `refuse`. */
  dropped: number;
  /** Of those, the ones closed at once because the proxy refused them (`refuse`). */
  refused: number;
  bytesUp: number;
  bytesDown: number;
}

/** Kafka api keys the triggers name. */
export const KAFKA_API = { PRODUCE: 0, LIST_OFFSETS: 2, OFFSET_COMMIT: 8, OFFSET_FETCH: 9, FIND_COORDINATOR: 10, INIT_PRODUCER_ID: 22, END_TXN: 26, TXN_OFFSET_COMMIT: 28 } as const;

/** The fixed fields at the start of a request header (every version has them). */
export interface RequestHeader {
  apiKey: number;
  apiVersion: number;
  correlationId: number;
}

/** Where a frame starts, has its header (a copy of its first bytes, zero-filled past a shorter frame's end) and ends, by offset in the chunk. */
export type FrameEvent = { kind: 'start'; at: number } | { kind: 'header'; at: number; header: Buffer } | { kind: 'end'; at: number };

/**
 * Follows the Kafka frames (INT32 size + that many bytes) of one direction of a connection,
 * whatever the TCP chunks: frames split across chunks (even inside the size), several in one
 * chunk. Copies only the first `headerLength` bytes of each frame (size included).
 */
export class KafkaFrames {
  private readonly head: Buffer;
  private headLen = 0;
  /** Where this frame's header ends: `headerLength`, or the frame's end if it is shorter (-1 until the size is read). */
  private headEnd = -1;
  /** Bytes of this frame after its header not seen yet. */
  private left = 0;
  private inFrame = false;

  constructor(readonly headerLength: number) {
    if (headerLength < 4) throw new RangeError('a frame header holds at least the size');
    this.head = Buffer.alloc(headerLength);
  }

  /** The frame starts, headers and ends in `chunk`, in order. */
  scan(chunk: Buffer): FrameEvent[] {
    const out: FrameEvent[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (!this.inFrame) {
        out.push({ kind: 'start', at });
        this.inFrame = true;
        this.headLen = 0;
        this.headEnd = -1;
      }
      if (this.headLen < 4 || this.headLen < this.headEnd) {
        const want = (this.headLen < 4 ? 4 : this.headEnd) - this.headLen;
        const n = Math.min(want, chunk.length - at);
        chunk.copy(this.head, this.headLen, at, at + n);
        this.headLen += n;
        at += n;
        if (this.headLen === 4 && this.headEnd < 0) {
          const size = this.head.readInt32BE(0);
          if (size < 0) throw new RangeError(`negative Kafka frame size ${size}`);
          this.headEnd = Math.min(this.headerLength, 4 + size);
          this.left = 4 + size - this.headEnd;
        }
        if (this.headLen < this.headEnd || this.headEnd < 0) continue; // more of the header to come
        const header = Buffer.alloc(this.headerLength);
        this.head.copy(header, 0, 0, this.headEnd);
        out.push({ kind: 'header', at, header });
      }
      const n = Math.min(this.left, chunk.length - at);
      this.left -= n;
      at += n;
      if (this.left === 0) {
        out.push({ kind: 'end', at });
        this.inFrame = false;
      }
    }
    return out;
  }
}

/** Bytes of a request frame's header (size included) the proxy reads: size, api key, api version, correlation id. */
export const REQUEST_HEADER_BYTES = 12;
/** Bytes of a response frame's header the proxy reads: size, correlation id. */
export const RESPONSE_HEADER_BYTES = 8;

/** A request frame's (with its size prefix) api key, version and correlation id. */
export function requestHeader(frame: Buffer): RequestHeader {
  if (frame.length < REQUEST_HEADER_BYTES) throw new RangeError(`a request frame of ${frame.length} bytes has no header`);
  return { apiKey: frame.readInt16BE(4), apiVersion: frame.readInt16BE(6), correlationId: frame.readInt32BE(8) };
}

/** A response frame's (with its size prefix) correlation id. */
export function responseCorrelationId(frame: Buffer): number {
  if (frame.length < RESPONSE_HEADER_BYTES) throw new RangeError(`a response frame of ${frame.length} bytes has no header`);
  return frame.readInt32BE(4);
}

/**
 * Whether a request is EndTxn with `committed` true (a commit, not an abort). Versions 0–2 (what
 * kafkajs sends) end with that BOOLEAN; flexible ones (3+) with it and then an empty tag buffer.
 */
export function isEndTxnCommit(header: RequestHeader, frame: Buffer): boolean {
  if (header.apiKey !== KAFKA_API.END_TXN) return false;
  return frame[frame.length - (header.apiVersion >= 3 ? 2 : 1)] === 1;
}

export type CutAction = 'cut' | 'stall' | 'drop';

export interface Trigger {
  apiKey: number;
  action: CutAction;
  /** Further condition on the request (its header and whole frame); default: any request of `apiKey`. */
  match?: (header: RequestHeader, frame: Buffer) => boolean;
}

/** What the proxy did when a one-shot trigger fired. */
export interface Fired {
  header: RequestHeader;
  action: CutAction;
  /** Whether the broker answered the request (never, for `drop`). */
  answered: boolean;
}

/** A trigger in force: one-shot (`arm`) or standing for one process's connections (`cutAfter`). */
interface Armed {
  apiKeys: ReadonlySet<number>;
  action: CutAction;
  match?: Trigger['match'];
  /** Only the connections of this client process (standing); undefined: any connection, once. */
  pid?: number;
  /** How many requests it fired on. */
  count: number;
  /** A one-shot trigger's promise. */
  resolve?: (f: Fired) => void;
}

interface Pipe {
  client: net.Socket;
  upstream: net.Socket;
  /** The client's request frames and the broker's answers (a Kafka proxy's pipes only). */
  requests?: KafkaFrames;
  responses?: KafkaFrames;
  /** The request frame held since its start because a trigger may apply to it. */
  held?: { parts: Buffer[]; header?: RequestHeader };
  /** The request a trigger fired on (cut or stall): its answer is awaited, and no answer is forwarded any more. */
  fired?: { correlationId: number; action: CutAction; answered: () => void };
  /** Whether the client socket belongs to each process asked about (cutAfter), found once. */
  owners?: Map<number, boolean>;
  /** When the client last sent a request of each api key (a Kafka proxy's pipes only): `sentRecently`. */
  lastSent?: Map<number, number>;
  /** When the last delayed chunk of each direction is due: later chunks never overtake it. */
  dueUp: number;
  dueDown: number;
  /** Stalled by `cut`: held until its process is uncut, whatever the mode. */
  cut: boolean;
}

/** The inodes of the sockets process `pid` holds open (empty when it is gone). */
function socketInodes(pid: number): Set<string> {
  const out = new Set<string>();
  let fds: string[] = [];
  try {
    fds = fs.readdirSync(`/proc/${pid}/fd`);
  } catch {
    return out;
  }
  for (const fd of fds) {
    try {
      const link = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (link.startsWith('socket:[')) out.add(link.slice(8, -1));
    } catch {
      // closed meanwhile
    }
  }
  return out;
}

/** The inode of each IPv4 TCP socket by `<local port>:<remote port>` (/proc/net/tcp; ports in hex there). */
function tcpInodes(): Map<string, string> {
  const out = new Map<string, string>();
  let text = '';
  try {
    text = fs.readFileSync('/proc/net/tcp', 'utf8');
  } catch {
    return out;
  }
  for (const line of text.split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 10 || cols[9] === '0') continue; // 0: a socket no process holds (TIME_WAIT)
    const local = Number.parseInt(cols[1]!.split(':')[1]!, 16);
    const remote = Number.parseInt(cols[2]!.split(':')[1]!, 16);
    out.set(`${local}:${remote}`, cols[9]!);
  }
  return out;
}

export class TcpProxy {
  private server?: net.Server;
  private readonly pipes = new Set<Pipe>();
  /** Pipes cut after a request: the client's side is gone, the broker's waits for its answer. */
  private readonly lingering = new Set<Pipe>();
  private mode: ProxyMode = 'pass';
  private delayMs = 0;
  private refusing = false;
  /** Processes cut off (`cut`): their connections stay stalled. */
  private readonly cutPids = new Set<number>();
  /** The triggers in force, in the order they were armed (the first that matches fires). */
  private triggers: Armed[] = [];
  /** Every one-shot trigger that fired, in order. */
  readonly fired: Fired[] = [];
  readonly stats: ProxyStats = { accepted: 0, dropped: 0, refused: 0, bytesUp: 0, bytesDown: 0 };

  constructor(
    readonly name: string,
    readonly listenPort: number,
    readonly target: { host: string; port: number },
    readonly host = '127.0.0.1',
    /** Follow the connections' Kafka frames (for triggers: `arm`, `cutAfter`). */
    readonly kafkaRequests = false,
  ) {}

  get port(): number {
    const a = this.server?.address();
    return a && typeof a === 'object' ? a.port : this.listenPort;
  }

  get currentMode(): ProxyMode {
    return this.mode;
  }

  get connections(): number {
    return this.pipes.size;
  }

  async start(): Promise<void> {
    const server = net.createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.listenPort, this.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
  }

  async close(): Promise<void> {
    for (const p of this.pipes) this.destroy(p);
    for (const p of this.lingering) p.upstream.destroy();
    this.lingering.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Switches the mode; `delayMs` is the added latency of `delay`. */
  setMode(mode: ProxyMode, delayMs = 0): void {
    const was = this.mode;
    this.mode = mode;
    this.delayMs = mode === 'delay' ? delayMs : 0;
    if (mode === 'drop') for (const p of this.pipes) this.destroy(p, true);
    if (mode === 'stall') for (const p of this.pipes) this.pauseBoth(p);
    if (was === 'stall' && mode !== 'stall') for (const p of this.pipes) if (!p.cut) this.resumeBoth(p);
  }

  /** While on, every new connection is closed as soon as it is accepted; open ones are left alone. */
  refuse(on: boolean): void {
    this.refusing = on;
  }

  /** Stalls every connection of process `pid`, open and new, until `uncut(pid)`; returns how many were open. */
  cut(pid: number): number {
    this.cutPids.add(pid);
    const owned = this.ownedBy(pid, [...this.pipes]);
    for (const p of owned) {
      p.cut = true;
      this.pauseBoth(p);
    }
    return owned.length;
  }

  /** Delivers what was held for process `pid`'s connections and forwards them again. */
  uncut(pid: number): void {
    if (!this.cutPids.delete(pid)) return;
    const held = [...this.pipes].filter((p) => p.cut);
    // Only the pipes of other processes still cut stay held.
    const still = new Set(this.cutPids.size > 0 ? [...this.cutPids].flatMap((other) => this.ownedBy(other, held)) : []);
    for (const p of held) {
      if (still.has(p)) continue;
      p.cut = false;
      if (this.mode !== 'stall') this.resumeBoth(p);
    }
  }

  /**
   * Arms a one-shot trigger: the next matching request (on any connection) gets `action`.
   * Resolves when it fired (the request forwarded or dropped, the client's side cut or stalled).
   */
  arm(trigger: Trigger): Promise<Fired> {
    this.requireKafka();
    return new Promise((resolve) => this.triggers.push({ apiKeys: new Set([trigger.apiKey]), action: trigger.action, match: trigger.match, count: 0, resolve }));
  }

  /**
   * From now on, each request of process `pid` whose api key is in `apiKeys` is cut after: forwarded
   * and its connection then closed before the answer reaches the client; until `stopCutAfter(pid)`,
   * which returns how many requests were cut after.
   */
  cutAfter(pid: number, apiKeys: readonly number[]): void {
    this.requireKafka();
    this.stopCutAfter(pid);
    this.triggers.push({ apiKeys: new Set(apiKeys), action: 'cut', pid, count: 0 });
  }

  /**
   * Whether process `pid` sent a request with one of `apiKeys` on a connection still open within
   * the last `withinMs` (e.g. a worker that is committing: the chaos suite's commit-cut victim).
   */
  sentRecently(pid: number, apiKeys: readonly number[], withinMs: number): boolean {
    this.requireKafka();
    const since = Date.now() - withinMs;
    const recent = [...this.pipes].filter((p) => apiKeys.some((k) => (p.lastSent?.get(k) ?? 0) >= since));
    return recent.some((p) => this.owns(pid, p));
  }

  stopCutAfter(pid: number): number {
    const armed = this.triggers.find((t) => t.pid === pid);
    this.triggers = this.triggers.filter((t) => t !== armed);
    return armed?.count ?? 0;
  }

  private requireKafka(): void {
    if (!this.kafkaRequests) throw new Error(`proxy ${this.name} does not follow Kafka requests`);
  }

  /** Whether the client socket of `p` belongs to process `pid` (looked up in /proc once per process). */
  private owns(pid: number, p: Pipe): boolean {
    p.owners ??= new Map();
    let mine = p.owners.get(pid);
    if (mine === undefined) {
      mine = this.ownedBy(pid, [p]).length > 0;
      p.owners.set(pid, mine);
    }
    return mine;
  }

  /** The triggers that apply to `p`'s requests (with api key `apiKey`, when given). */
  private triggersOf(p: Pipe, apiKey?: number): Armed[] {
    return this.triggers.filter((t) => (apiKey === undefined || t.apiKeys.has(apiKey)) && (t.pid === undefined || this.owns(t.pid, p)));
  }

  /** The pipes whose client socket belongs to process `pid`. */
  private ownedBy(pid: number, pipes: Pipe[]): Pipe[] {
    if (pipes.length === 0) return [];
    const theirs = socketInodes(pid);
    const inodes = tcpInodes();
    return pipes.filter((p) => {
      const inode = inodes.get(`${p.client.remotePort}:${this.port}`);
      return inode !== undefined && theirs.has(inode);
    });
  }

  private accept(client: net.Socket): void {
    this.stats.accepted++;
    if (this.mode === 'drop' || this.refusing) {
      this.stats.dropped++;
      if (this.mode !== 'drop') this.stats.refused++;
      client.destroy();
      return;
    }
    client.setNoDelay(true);
    const upstream = net.connect({ host: this.target.host, port: this.target.port });
    upstream.setNoDelay(true);
    const pipe: Pipe = {
      client,
      upstream,
      dueUp: 0,
      dueDown: 0,
      cut: false,
      ...(this.kafkaRequests ? { requests: new KafkaFrames(REQUEST_HEADER_BYTES), responses: new KafkaFrames(RESPONSE_HEADER_BYTES) } : {}),
    };
    this.pipes.add(pipe);
    const end = () => this.destroy(pipe);
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
    client.on('data', (chunk: Buffer) => (pipe.requests ? this.up(pipe, chunk) : this.forward(pipe, 'up', chunk)));
    upstream.on('data', (chunk: Buffer) => (pipe.responses ? this.down(pipe, chunk) : this.forward(pipe, 'down', chunk)));
    if (this.cutPids.size > 0 && [...this.cutPids].some((pid) => this.ownedBy(pid, [pipe]).length > 0)) pipe.cut = true;
    if (this.mode === 'stall' || pipe.cut) this.pauseBoth(pipe);
  }

  /**
   * A Kafka client's bytes: streamed as they come, except a request a trigger may apply to, held
   * from its start until it is complete, then forwarded or acted on.
   */
  private up(pipe: Pipe, chunk: Buffer): void {
    let from = 0; // the start of what is neither forwarded nor held yet
    for (const e of pipe.requests!.scan(chunk)) {
      if (e.kind === 'start') {
        if (pipe.fired || this.triggers.length === 0 || this.triggersOf(pipe).length === 0) continue;
        if (e.at > from) this.forward(pipe, 'up', chunk.subarray(from, e.at));
        from = e.at;
        pipe.held = { parts: [] };
      } else if (e.kind === 'header') {
        if (e.header.length >= 6) {
          pipe.lastSent ??= new Map();
          pipe.lastSent.set(e.header.readInt16BE(4), Date.now());
        }
        const held = pipe.held;
        if (!held) continue;
        const header = requestHeader(e.header);
        if (this.triggersOf(pipe, header.apiKey).length > 0) {
          held.header = header;
          continue;
        }
        // No trigger for this request: what was held of it (from earlier chunks) goes, the rest streams.
        pipe.held = undefined;
        for (const part of held.parts) this.forward(pipe, 'up', part);
      } else {
        const held = pipe.held;
        if (!held) continue;
        pipe.held = undefined;
        held.parts.push(chunk.subarray(from, e.at));
        from = e.at;
        const frame = held.parts.length === 1 ? held.parts[0]! : Buffer.concat(held.parts);
        const header = held.header!; // a frame is held past its header only when a trigger may apply to it
        const armed = this.triggersOf(pipe, header.apiKey).find((t) => t.match?.(header, frame) ?? true);
        if (!armed) this.forward(pipe, 'up', frame);
        else if (this.fire(pipe, armed, header, frame) === 'closed') return; // nothing more goes up
      }
    }
    if (pipe.held) pipe.held.parts.push(chunk.subarray(from));
    else if (from < chunk.length) this.forward(pipe, 'up', from === 0 ? chunk : chunk.subarray(from));
  }

  /** The broker's bytes: its answers followed, to learn when a request a trigger fired on is answered. */
  private down(pipe: Pipe, chunk: Buffer): void {
    const fired = pipe.fired;
    if (fired) {
      for (const e of pipe.responses!.scan(chunk)) {
        if (e.kind === 'header' && responseCorrelationId(e.header) === fired.correlationId) fired.answered();
      }
      return; // answers after a cut or stalled request are never delivered
    }
    pipe.responses!.scan(chunk);
    this.forward(pipe, 'down', chunk);
  }

  /** Acts on `frame`, a request `armed` matched; returns whether the client's connection is closed. */
  private fire(pipe: Pipe, armed: Armed, header: RequestHeader, frame: Buffer): 'closed' | 'open' {
    armed.count++;
    let record: Fired | undefined;
    if (armed.resolve) {
      this.triggers = this.triggers.filter((t) => t !== armed);
      record = { header, action: armed.action, answered: false };
      this.fired.push(record);
    }
    const done = () => {
      if (record) armed.resolve?.(record);
    };
    if (armed.action === 'drop') {
      // What went up before it still reaches the broker, then its side is closed too.
      this.pipes.delete(pipe);
      this.stats.dropped++;
      pipe.client.destroy();
      this.afterUp(pipe, () => pipe.upstream.end());
      setTimeout(() => pipe.upstream.destroy(), 5_000).unref();
      done();
      return 'closed';
    }
    pipe.fired = {
      correlationId: header.correlationId,
      action: armed.action,
      answered: () => {
        if (record) record.answered = true;
        if (armed.action === 'cut') pipe.upstream.destroy();
      },
    };
    if (armed.action === 'stall') {
      this.forward(pipe, 'up', frame);
      done();
      return 'open';
    }
    this.cutAfterRequest(pipe, frame);
    done();
    return 'closed';
  }

  private forward(pipe: Pipe, direction: 'up' | 'down', chunk: Buffer): void {
    const to = direction === 'up' ? pipe.upstream : pipe.client;
    const from = direction === 'up' ? pipe.client : pipe.upstream;
    if (direction === 'up') this.stats.bytesUp += chunk.length;
    else this.stats.bytesDown += chunk.length;
    const write = () => {
      if (to.destroyed) return;
      // Back-pressure: stop reading the other side until this one drains (unless stalled anyway).
      if (!to.write(chunk)) {
        from.pause();
        to.once('drain', () => {
          if (this.mode !== 'stall' && !pipe.cut) from.resume();
        });
      }
    };
    if (this.delayMs <= 0) {
      const due = direction === 'up' ? pipe.dueUp : pipe.dueDown;
      if (due <= Date.now()) write();
      else setTimeout(write, due - Date.now());
      return;
    }
    const key = direction === 'up' ? 'dueUp' : 'dueDown';
    const due = Math.max(Date.now() + this.delayMs, pipe[key]);
    pipe[key] = due;
    setTimeout(write, due - Date.now());
  }

  /** Runs `then` after what a delay fault still holds of the client's bytes on this connection, in order. */
  private afterUp(p: Pipe, then: () => void): void {
    const due = p.dueUp - Date.now();
    if (due > 0) setTimeout(then, due);
    else then();
  }

  /**
   * Sends `request` (the request to cut after) to the broker, closes the client's side at once,
   * and the broker's when the broker answered it (or after 30 s): the broker did get the request.
   */
  private cutAfterRequest(p: Pipe, request: Buffer): void {
    this.pipes.delete(p);
    this.lingering.add(p);
    p.client.removeAllListeners('data');
    p.client.destroy();
    this.stats.dropped++;
    this.stats.bytesUp += request.length;
    const timer = setTimeout(() => p.upstream.destroy(), 30_000);
    timer.unref();
    p.upstream.once('close', () => {
      clearTimeout(timer);
      this.lingering.delete(p);
    });
    p.upstream.resume();
    this.afterUp(p, () => {
      if (!p.upstream.destroyed) p.upstream.write(request);
    });
  }

  private pauseBoth(p: Pipe): void {
    p.client.pause();
    p.upstream.pause();
  }

  private resumeBoth(p: Pipe): void {
    p.client.resume();
    p.upstream.resume();
  }

  private destroy(p: Pipe, counted = false): void {
    if (!this.pipes.delete(p)) return;
    if (counted) this.stats.dropped++;
    p.client.destroy();
    p.upstream.destroy();
  }
}
