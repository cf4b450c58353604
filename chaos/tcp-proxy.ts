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
 */
export type ProxyMode = 'pass' | 'drop' | 'stall' | 'delay';

export interface ProxyStats {
  accepted: number;
  dropped: number;
  bytesUp: number;
  bytesDown: number;
}

interface Pipe {
  client: net.Socket;
  upstream: net.Socket;
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
  readonly stats: ProxyStats = { accepted: 0, dropped: 0, bytesUp: 0, bytesDown: 0 };

  constructor(
    readonly name: string,
    readonly listenPort: number,
    readonly target: { host: string; port: number },
    readonly host = '127.0.0.1',
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
    const pipe: Pipe = { client, upstream, dueUp: 0, dueDown: 0, cut: false };
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
