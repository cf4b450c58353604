import fs from 'node:fs';
import net from 'node:net';

/**
 * A loopback TCP proxy for network faults: every connection to `listenPort` is forwarded to
 * `target`. Modes, switchable at any time:
 *   pass   forward as is;
 *   drop   destroy every open connection, and every new one as soon as it is accepted;
 *   stall  stop forwarding (both directions, open and new connections; sockets paused, so
 *          TCP back-pressure builds), then deliver everything held when the mode changes;
 *   delay  forward each chunk `delayMs` late (order kept per direction).
 * Besides the mode, `cut(pid)` stalls only the connections of one client process (found through
 * /proc, Linux), open and new, until `uncut(pid)`: one worker cut off while the others go on.
 * A proxy in front of a Kafka broker (`kafkaRequests`) also follows the client's request frames:
 * `cutAfter(pid, apiKeys)` forwards each of that process's requests with one of those api keys
 * and then closes the client's connection at once (the broker's side once it has answered), so
 * the broker handles the request and the client never learns its answer — an ambiguous commit
 * when the request is EndTxn or OffsetCommit.
 */
export type ProxyMode = 'pass' | 'drop' | 'stall' | 'delay';

export interface ProxyStats {
  accepted: number;
  dropped: number;
  bytesUp: number;
  bytesDown: number;
}

/** Kafka api keys of the requests a commit-cut fault cuts after. */
export const KAFKA_API = { OFFSET_COMMIT: 8, END_TXN: 26 } as const;

/**
 * Where the Kafka request frames (INT32 size, then INT16 api key, …) of a client's byte stream end,
 * whatever the TCP chunks: frames split across chunks, several in one chunk. Copies only headers.
 */
export class RequestFrames {
  private readonly head = Buffer.alloc(6);
  private headLen = 0;
  private left = 0;
  private apiKey = -1;

  /** The frames that end in `chunk`: each's api key and the offset in `chunk` just past its last byte. */
  scan(chunk: Buffer): Array<{ apiKey: number; end: number }> {
    const out: Array<{ apiKey: number; end: number }> = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.headLen < 6) {
        const n = Math.min(6 - this.headLen, chunk.length - at);
        chunk.copy(this.head, this.headLen, at, at + n);
        this.headLen += n;
        at += n;
        if (this.headLen < 6) break;
        this.apiKey = this.head.readInt16BE(4);
        this.left = Math.max(0, this.head.readInt32BE(0) - 2);
      }
      const n = Math.min(this.left, chunk.length - at);
      this.left -= n;
      at += n;
      if (this.left === 0) {
        out.push({ apiKey: this.apiKey, end: at });
        this.headLen = 0;
      }
    }
    return out;
  }
}

interface Pipe {
  client: net.Socket;
  upstream: net.Socket;
  /** The client's request frames (a Kafka proxy's pipes only). */
  requests?: RequestFrames;
  /** Whether the client socket belongs to each process asked about (cutAfter), found once. */
  owners?: Map<number, boolean>;
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
  private mode: ProxyMode = 'pass';
  private delayMs = 0;
  /** Processes cut off (`cut`): their connections stay stalled. */
  private readonly cutPids = new Set<number>();
  /** Processes whose requests with these api keys are cut after (cutAfter), and how many were. */
  private readonly cutAfterPids = new Map<number, { apiKeys: ReadonlySet<number>; cuts: number }>();
  readonly stats: ProxyStats = { accepted: 0, dropped: 0, bytesUp: 0, bytesDown: 0 };

  constructor(
    readonly name: string,
    readonly listenPort: number,
    readonly target: { host: string; port: number },
    readonly host = '127.0.0.1',
    /** Follow the clients' Kafka request frames (for cutAfter). */
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
   * From now on, each request of process `pid` whose api key is in `apiKeys` is forwarded and its
   * connection then closed before the answer reaches the client; until `stopCutAfter(pid)`, which
   * returns how many requests were cut after.
   */
  cutAfter(pid: number, apiKeys: readonly number[]): void {
    if (!this.kafkaRequests) throw new Error(`proxy ${this.name} does not follow Kafka requests`);
    this.cutAfterPids.set(pid, { apiKeys: new Set(apiKeys), cuts: 0 });
  }

  stopCutAfter(pid: number): number {
    const armed = this.cutAfterPids.get(pid);
    this.cutAfterPids.delete(pid);
    return armed?.cuts ?? 0;
  }

  /** The armed process this pipe's client belongs to, if any (looked up in /proc once per process). */
  private armedOwner(p: Pipe): { pid: number; apiKeys: ReadonlySet<number>; cuts: number } | undefined {
    for (const [pid, armed] of this.cutAfterPids) {
      p.owners ??= new Map();
      let mine = p.owners.get(pid);
      if (mine === undefined) {
        mine = this.ownedBy(pid, [p]).length > 0;
        p.owners.set(pid, mine);
      }
      if (mine) return Object.assign(armed, { pid });
    }
    return undefined;
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
    if (this.mode === 'drop') {
      this.stats.dropped++;
      client.destroy();
      return;
    }
    client.setNoDelay(true);
    const upstream = net.connect({ host: this.target.host, port: this.target.port });
    upstream.setNoDelay(true);
    const pipe: Pipe = { client, upstream, dueUp: 0, dueDown: 0, cut: false, ...(this.kafkaRequests ? { requests: new RequestFrames() } : {}) };
    this.pipes.add(pipe);
    const end = () => this.destroy(pipe);
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
    client.on('data', (chunk) => this.forward(pipe, 'up', chunk));
    upstream.on('data', (chunk) => this.forward(pipe, 'down', chunk));
    if (this.cutPids.size > 0 && [...this.cutPids].some((pid) => this.ownedBy(pid, [pipe]).length > 0)) pipe.cut = true;
    if (this.mode === 'stall' || pipe.cut) this.pauseBoth(pipe);
  }

  private forward(pipe: Pipe, direction: 'up' | 'down', chunk: Buffer): void {
    if (direction === 'up' && pipe.requests) {
      const frames = pipe.requests.scan(chunk);
      if (this.cutAfterPids.size > 0 && frames.length > 0) {
        const armed = this.armedOwner(pipe);
        const hit = armed && frames.find((f) => armed.apiKeys.has(f.apiKey));
        if (armed && hit) {
          armed.cuts++;
          this.cutAfterRequest(pipe, chunk.subarray(0, hit.end));
          return;
        }
      }
    }
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

  /**
   * Sends `upTo` (ending with the request to cut after) to the broker, closes the client's side at
   * once, and the broker's when its answer comes (or after 10 s): the broker did get the request.
   */
  private cutAfterRequest(p: Pipe, upTo: Buffer): void {
    this.pipes.delete(p);
    p.client.removeAllListeners('data');
    p.upstream.removeAllListeners('data');
    p.upstream.removeAllListeners('close');
    p.client.destroy();
    this.stats.dropped++;
    this.stats.bytesUp += upTo.length;
    const done = () => p.upstream.destroy();
    const timer = setTimeout(done, 10_000);
    p.upstream.once('data', () => {
      clearTimeout(timer);
      done();
    });
    p.upstream.once('close', () => clearTimeout(timer));
    p.upstream.resume();
    // After what a delay fault still holds for this connection, in order.
    const send = () => {
      if (!p.upstream.destroyed) p.upstream.write(upTo);
    };
    const due = p.dueUp - Date.now();
    if (due > 0) setTimeout(send, due);
    else send();
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
