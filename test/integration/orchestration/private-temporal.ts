import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../../workers/observability/metrics-server';

const run = promisify(execFile);
const bin = path.join(__dirname, '../../../bin/kafka-flow-temporal.js');

/**
 * A Temporal dev server of a test's own (`kafka-flow-temporal infra`, its own port and data
 * directory), for tests that stop, restart or freeze it: the shared one stays up for the others.
 * While it is up, this process's TEMPORAL_ADDRESS points at it (status queries go there).
 */
export class PrivateTemporal {
  private constructor(
    readonly port: number,
    private readonly dataDir: string,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  static async create(): Promise<PrivateTemporal> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-private-temporal-'));
    const [port, uiPort] = [await freePort(), await freePort()];
    return new PrivateTemporal(port, dataDir, { KFT_INFRA_SERVERS: 'temporal', KFT_DATA_DIR: dataDir, TEMPORAL_ADDRESS: `127.0.0.1:${port}`, TEMPORAL_UI_PORT: String(uiPort) });
  }

  private savedAddress: string | undefined;

  /** Its address, for the workers' environment. */
  get address(): string {
    return this.env.TEMPORAL_ADDRESS!;
  }

  /** Starts it (again: the same database file, the workflows still there). */
  async up(): Promise<void> {
    await this.infra('up');
    this.savedAddress ??= process.env.TEMPORAL_ADDRESS ?? '';
    process.env.TEMPORAL_ADDRESS = this.address;
  }

  down(): Promise<unknown> {
    return this.infra('down');
  }

  /** The server's pid (to freeze it with SIGSTOP). */
  pid(): number {
    const ps = execFileSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' });
    const line = ps.split('\n').find((l) => l.includes('temporal server start-dev') && l.includes(`--port ${this.port} `));
    if (!line) throw new Error(`no Temporal dev server on port ${this.port} in:\n${ps}`);
    return Number(line.trim().split(/\s+/)[0]);
  }

  /** Stops it, gives TEMPORAL_ADDRESS back and deletes its data. */
  async close(): Promise<void> {
    if (this.savedAddress !== undefined) {
      if (this.savedAddress === '') delete process.env.TEMPORAL_ADDRESS;
      else process.env.TEMPORAL_ADDRESS = this.savedAddress;
    }
    await this.down().catch(() => undefined);
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }

  private infra(cmd: string): Promise<unknown> {
    return run(process.execPath, [bin, 'infra', cmd], { env: { ...process.env, ...this.env } });
  }
}
