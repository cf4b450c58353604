import net from 'node:net';

/**
 * A loopback TCP proxy for network faults: every connection to `listenPort` is forwarded to
 * `target`. Modes, switchable at any time:
 *   pass   forward as is;
 *   drop   destroy every open connection, and every new one as soon as it is accepted;
 *   stall  stop forwarding (both directions, open and new connections; sockets paused, so
 *          TCP back-pressure builds), then deliver everything held when the mode changes;
 *   delay  forward each chunk `delayMs` late (order kept per direction).
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
}

export class TcpProxy {
  private server?: net.Server;
  private readonly pipes = new Set<Pipe>();
  private mode: ProxyMode = 'pass';
  private delayMs = 0;
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
    if (was === 'stall' && mode !== 'stall') for (const p of this.pipes) this.resumeBoth(p);
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
    const pipe: Pipe = { client, upstream, dueUp: 0, dueDown: 0 };
    this.pipes.add(pipe);
    const end = () => this.destroy(pipe);
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
    client.on('data', (chunk) => this.forward(pipe, 'up', chunk));
    upstream.on('data', (chunk) => this.forward(pipe, 'down', chunk));
    if (this.mode === 'stall') this.pauseBoth(pipe);
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
          if (this.mode !== 'stall') from.resume();
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
