// Committed offsets vs log end, sampled every second: stalls and recoveries.
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Admin } from 'kafkajs';
import { createKafkaClient } from '../kafka';
import type { CpuLog } from './cpu';
import type { FaultRecord } from './fault-log';
import { type Mode, serversNeeded } from './modes';
import { type Outages, recoveryFigures, type Server } from './outages';
import { PARTITIONS, rel, SAMPLE_EVERY_MS } from './settings';

export interface Offsets {
  committed: bigint;
  end: bigint;
}
export interface PendingRecovery {
  record: FaultRecord;
  modes: number[];
  healedAt: number;
  baseline?: Map<string, bigint>;
}

export interface Stall {
  ms: number;
  key: string;
  fromS: number;
  toS: number;
  /** Time within it when a server the partition needs was out. */
  outageMs: number;
}

export class Sampler {
  readonly last = new Map<string, Offsets>();
  private readonly lastProgress = new Map<string, number>();
  /** The longest time a partition made no progress while every server its mode needs was up. */
  maxStall: Stall = { ms: 0, key: '-', fromS: 0, toS: 0, outageMs: 0 };
  /** The longest such time per mode (by mode id). */
  readonly maxStallByMode = new Map<string, Stall>();
  /** The same, counting the time a server was out too. */
  maxStallWithOutages: Stall = { ms: 0, key: '-', fromS: 0, toS: 0, outageMs: 0 };
  samples = 0;
  failedSamples = 0;
  private readonly pending: PendingRecovery[] = [];
  private lastMove = Date.now();
  private running = false;
  private loop?: Promise<void>;
  private admin?: Admin;

  constructor(
    private readonly modes: Mode[],
    private readonly brokers: string[],
    private readonly outages: Outages,
    /**
     * Where every sample's committed offset and log end per partition go (`<s> <mode>/<p>
     * <committed> <end>`, s since the run's start), so that a stall or a recovery can be traced
     * after the run without reading the group's offsets topic.
     */
    private readonly offsetsFile?: string,
    /** The machine's CPU, sampled with the offsets (cpu.log). */
    readonly cpu?: CpuLog,
  ) {}

  start(): void {
    this.running = true;
    const now = Date.now();
    for (const m of this.modes) for (let p = 0; p < PARTITIONS; p++) this.lastProgress.set(`${m.spec.id}/${p}`, now);
    this.loop = (async () => {
      while (this.running) {
        await this.sample();
        await sleep(SAMPLE_EVERY_MS);
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    await this.admin?.disconnect().catch(() => undefined);
  }

  watchRecovery(record: FaultRecord, modes: number[]): void {
    this.pending.push({ record, modes, healedAt: Date.now() });
  }

  unrecovered(): FaultRecord[] {
    return this.pending.map((p) => p.record);
  }

  /** The servers the modes at `indices` need (a fault's recovery leaves out the time they were out). */
  private serversOf(indices: number[]): Server[] {
    return [...new Set(indices.flatMap((i) => serversNeeded(this.modes[i]!.spec)))];
  }

  /**
   * Faults whose recovery was never seen count with the time from their heal to `end` (a lower
   * bound: leaving them out would flatter the figure), outages meanwhile left out as for the others.
   */
  censor(end: number): FaultRecord[] {
    for (const r of this.pending) {
      const { recoveryS, wallS } = recoveryFigures(this.outages, this.serversOf(r.modes), r.healedAt, end);
      r.record.recoveryCensoredS = recoveryS;
      r.record.recoveryCensoredWallS = wallS;
    }
    return this.unrecovered();
  }

  private async offsets(m: Mode): Promise<Map<number, Offsets>> {
    if (!this.admin) {
      this.admin = createKafkaClient({ brokers: this.brokers, clientId: 'chaos-sampler', logLevel: 'nothing' }).kafka.admin({ retry: { retries: 0 } });
      await this.admin.connect();
    }
    const [committed] = await this.admin.fetchOffsets({ groupId: m.name, topics: [m.topic] });
    const ends = await this.admin.fetchTopicOffsets(m.topic);
    const out = new Map<number, Offsets>();
    for (const e of ends) {
      const c = committed?.partitions.find((x) => x.partition === e.partition)?.offset ?? '-1';
      out.set(e.partition, { committed: BigInt(c), end: BigInt(e.high) });
    }
    return out;
  }

  async sample(): Promise<void> {
    let all: Array<Map<number, Offsets>>;
    try {
      all = await withTimeout(Promise.all(this.modes.map((m) => this.offsets(m))), 5_000);
    } catch {
      this.failedSamples++;
      const admin = this.admin;
      this.admin = undefined;
      await admin?.disconnect().catch(() => undefined);
      return;
    }
    this.samples++;
    const now = Date.now();
    this.cpu?.sample(rel(now));
    if (this.offsetsFile) {
      const lines = this.modes.flatMap((m, i) => [...all[i]!].map(([p, o]) => `${rel(now)} ${m.spec.id}/${p} ${o.committed} ${o.end}`));
      fs.appendFileSync(this.offsetsFile, `${lines.join('\n')}\n`);
    }
    this.modes.forEach((m, i) => {
      for (const [p, o] of all[i]!) {
        const key = `${m.spec.id}/${p}`;
        const before = this.last.get(key);
        if (before && before.committed !== o.committed) this.lastMove = now;
        if (!before || before.committed !== o.committed || o.committed >= o.end) this.lastProgress.set(key, now);
        const since = this.lastProgress.get(key) ?? now;
        const outageMs = this.outages.downMs(serversNeeded(m.spec), since, now);
        const stall = (ms: number): Stall => ({ ms, key, fromS: rel(since), toS: rel(now), outageMs });
        if (now - since - outageMs > this.maxStall.ms) this.maxStall = stall(now - since - outageMs);
        if (now - since - outageMs > (this.maxStallByMode.get(m.spec.id)?.ms ?? -1)) this.maxStallByMode.set(m.spec.id, stall(now - since - outageMs));
        if (now - since > this.maxStallWithOutages.ms) this.maxStallWithOutages = stall(now - since);
        this.last.set(key, o);
      }
    });
    for (const r of [...this.pending]) {
      const keys = r.modes.flatMap((i) => Array.from({ length: PARTITIONS }, (_, p) => `${this.modes[i]!.spec.id}/${p}`));
      if (!r.baseline) {
        if (now - r.healedAt < 0) continue;
        r.baseline = new Map(keys.map((k) => [k, this.last.get(k)?.committed ?? -1n]));
        continue;
      }
      const done = keys.every((k) => {
        const o = this.last.get(k);
        return o !== undefined && (o.committed > r.baseline!.get(k)! || o.committed >= o.end);
      });
      if (done) {
        const { recoveryS, wallS } = recoveryFigures(this.outages, this.serversOf(r.modes), r.healedAt, now);
        r.record.recoveryS = recoveryS;
        r.record.recoveryWallS = wallS;
        this.pending.splice(this.pending.indexOf(r), 1);
      }
    }
  }

  /** The last time any partition's committed offset moved. */
  lastAnyProgress(): number {
    return this.lastMove;
  }

  caughtUp(): boolean {
    return this.modes.every((m) => Array.from({ length: PARTITIONS }, (_, p) => this.last.get(`${m.spec.id}/${p}`)).every((o) => o && o.committed === o.end));
  }
}

export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    }),
  ]);
}
