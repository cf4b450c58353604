/**
 * The local state store of one snapshot partition (Kafka Streams' state.dir task store, for the
 * snapshot topic as changelog): an LMDB environment under `<stateDir>/<group>/<flow>/<snapshot
 * topic>-<p>` holding each key's latest snapshot record and ONE checkpoint, always committed
 * together in one LMDB transaction, so a crash at any moment leaves a consistent pair.
 *
 * What the pair means: the local copy reflects every committed record of the snapshot partition
 * below `checkpoint`, and possibly some of this partition's own later records (written after a
 * transaction of ours landed). Reading the partition from `checkpoint` to the bound on top of it
 * then gives exactly what a full read gives: every key whose local value could be stale has a
 * record in the delta. See docs/local-state.md.
 *
 * What can be trusted is checked on load: a format version, the identity (flow, group, snapshot
 * topic, partition, transactional.id), a checksum over the checkpoint record and an
 * order-independent digest over every entry (XOR of each entry's MD5), maintained incrementally
 * on every write and recomputed while loading.
 *
 * LMDB does not checksum its pages, and a damaged file can crash the process that reads it
 * (SIGSEGV). So the file is never opened blind: a clean close records the data file's SHA-256 in
 * `clean.json` (checked before the next open); after an unclean end (no marker: kill -9, power
 * loss) a child process reads the whole store first, and a crash there only discards the store.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { open, type Database, type RootDatabase } from 'lmdb';
import xxhashWasm from 'xxhash-wasm';
import type { StoredSnapshot } from './recovery';
import { InternalError, KafkaFlowError } from '../../config/errors';
import type { TimeDomain } from '../../core/persistence-types';
import { dueAfter, dueEntries, dueRange, readDueEntry } from './due-index';
import { recordTimers } from './record-timers';

/** 2: with the due-time index (`due`); a store of format 1 has none and is restored afresh. */
export const LOCAL_STATE_FORMAT = 2;

/** What a local store belongs to; any difference discards it. */
export interface LocalStateIdentity {
  readonly flow: string;
  readonly groupId: string;
  readonly snapshotTopic: string;
  readonly partition: number;
  readonly transactionalId: string;
}

/** The checkpoint record, written in the same LMDB transaction as the entries it describes. */
export interface LocalCheckpoint {
  readonly format: number;
  readonly identity: LocalStateIdentity;
  /** The snapshot-partition offset below which the local copy is complete. */
  readonly checkpoint: string;
  /** When the checkpoint was last known current (ms since epoch): bounds the tombstone-retention check. */
  readonly currentAt: number;
  readonly keys: number;
  /** XOR of every entry's digest, hex. */
  readonly digest: string;
  /** sha256 over the fields above, hex. */
  readonly checksum: string;
}

export type LocalLoad =
  /** `entries`: every entry, unless the load was asked not to read them (a bounded state cache reads keys on demand). */
  | { readonly kind: 'loaded'; readonly entries: Map<string, StoredSnapshot> | undefined; readonly checkpoint: LocalCheckpoint }
  | { readonly kind: 'none' }
  | { readonly kind: 'untrusted'; readonly reason: string; readonly cause: LocalDiscardCause };

export type LocalDiscardCause = 'unreadable' | 'format' | 'identity' | 'checksum' | 'log-start' | 'beyond-log-end' | 'retention';

/** One key's change in a local write: a new record, or a removal (tombstone). */
export type LocalUpdate = readonly [key: string, next: StoredSnapshot | undefined];

const CHECKPOINT_KEY = 'checkpoint';
const CLEAN_MARKER = 'clean.json';
const DATA_FILE = 'data.mdb';
const DIGEST_BYTES = 16;
/** The value of every due-index entry (the entry is all in its key). */
const INDEXED = Buffer.from([1]);

/** `<dir>/<group>/<flow>/<snapshotTopic>-<p>` with every part made safe for a file name. */
export function localStatePath(dir: string, id: LocalStateIdentity): string {
  return path.join(dir, safe(id.groupId), safe(id.flow), `${safe(id.snapshotTopic)}-${id.partition}`);
}

function safe(part: string): string {
  return part.replace(/[^A-Za-z0-9._-]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/** The digest of one entry: MD5 over key, offset and bytes (length-prefixed). */
export function entryDigest(key: string, stored: StoredSnapshot): Buffer {
  const h = createHash('md5');
  const k = Buffer.from(key, 'utf8');
  const head = Buffer.allocUnsafe(8);
  head.writeUInt32BE(k.length, 0);
  head.writeUInt32BE(stored.bytes.length, 4);
  h.update(head);
  h.update(k);
  h.update(stored.offset);
  h.update('\u0000');
  h.update(stored.bytes);
  return h.digest();
}

function xorInto(target: Buffer, d: Buffer): void {
  for (let i = 0; i < DIGEST_BYTES; i++) target[i]! ^= d[i]!;
}

export function checkpointChecksum(c: Omit<LocalCheckpoint, 'checksum'>): string {
  const { flow, groupId, snapshotTopic, partition, transactionalId } = c.identity;
  const canonical = JSON.stringify([c.format, flow, groupId, snapshotTopic, partition, transactionalId, c.checkpoint, c.currentAt, c.keys, c.digest]);
  return createHash('sha256').update(canonical).digest('hex');
}

/** Entry frame: 8-byte big-endian record offset, then the record's value bytes. */
function frame(stored: StoredSnapshot): Buffer {
  const out = Buffer.allocUnsafe(8 + stored.bytes.length);
  out.writeBigInt64BE(BigInt(stored.offset), 0);
  stored.bytes.copy(out, 8);
  return out;
}

function unframe(value: Buffer): StoredSnapshot {
  if (value.length < 8) throw new Error(`entry of ${value.length} bytes is shorter than its header`);
  // A view: LMDB hands every value out as its own copy.
  return { offset: value.readBigInt64BE(0).toString(), bytes: Buffer.from(value.buffer, value.byteOffset + 8, value.length - 8) };
}

function sameIdentity(a: LocalStateIdentity, b: LocalStateIdentity): string | undefined {
  for (const f of ['flow', 'groupId', 'snapshotTopic', 'partition', 'transactionalId'] as const) {
    if (a[f] !== b[f]) return `${f} is ${JSON.stringify(a[f])}, expected ${JSON.stringify(b[f])}`;
  }
  return undefined;
}

/** A newer store of the same partition took this one's path over in this process (a newer recovery). */
export class LocalStateSupersededError extends KafkaFlowError {
  constructor(storePath: string) {
    super('LOCAL_STATE_SUPERSEDED', `the local store ${storePath} was taken over by a newer recovery of its partition in this process`);
  }
}

/** The store holding each path in this process, and when it is ready to open it (its predecessor closed). */
const holders = new Map<string, { readonly store: LocalPartitionStore; readonly ready: Promise<void> }>();

/**
 * One partition's local store. Not shared between processes: every worker needs its own state
 * directory, which the backend enforces by locking it (state-dir-lock.ts: a second process gets
 * StateDirLockedError); a store written by two processes anyway fails its digest check and is
 * rebuilt.
 *
 * Within a process one store at a time holds a path. lmdb-js shares one LMDB environment per path
 * in a process, and a second store opening it while the first has a write in flight blocks the
 * main thread for good (a lock wait nothing ends: the process answers nothing, not even SIGTERM).
 * Two recoveries of one partition can overlap in a process (one started at the join and dropped,
 * the activity's own), so the store made later takes the path over: the older one is closed first,
 * its writes in flight landed, and refuses everything after (LocalStateSupersededError); an older
 * store never takes the path back from a newer one.
 */
export class LocalPartitionStore {
  readonly path: string;
  readonly identity: LocalStateIdentity;
  /** Creation order in this process: a store made later is the newer recovery's. */
  private static made = 0;
  private readonly made = ++LocalPartitionStore.made;
  private superseded = false;
  /**
   * Taken over in this process from a store that had the environment open (a standby copy, an
   * overlapping recovery): the file is as LMDB left it a moment ago here, so it is not verified again.
   */
  private handedOver = false;
  private env: RootDatabase | undefined;
  private entries: Database<Buffer, string> | undefined;
  private meta: Database<LocalCheckpoint, string> | undefined;
  /** The due-time index: one entry per pending key timer (due-index.ts), kept in the entries' write transactions. */
  private due: Database<Buffer, Buffer> | undefined;
  private digest = Buffer.alloc(DIGEST_BYTES);
  private keys = 0;
  private checkpoint: string | undefined;

  constructor(dir: string, identity: LocalStateIdentity) {
    this.identity = identity;
    this.path = localStatePath(dir, identity);
  }

  /** The checkpoint of the last local write (undefined before any). */
  get lastCheckpoint(): string | undefined {
    return this.checkpoint;
  }

  /**
   * Checks the local copy can be trusted (format, identity, checksum, digest) and reads its entries
   * (unless `readEntries` is false: a bounded state cache reads keys on demand with `get`); the
   * topic-side checks (log start, retention) are the caller's. An unreadable store is reported,
   * never thrown. Yields to the event loop every few thousand entries (other partitions go on).
   */
  async load(options: { readonly readEntries?: boolean } = {}): Promise<LocalLoad> {
    await this.hold();
    const data = path.join(this.path, DATA_FILE);
    if (!fs.existsSync(data)) return { kind: 'none' };
    const marker = readMarker(path.join(this.path, CLEAN_MARKER));
    // Closed cleanly and byte-identical since: exactly what this code wrote (the file checksum
    // covers every entry). Otherwise a child process reads every entry first and reports their
    // count and digest.
    let verified: EntriesDigest | undefined;
    if (this.handedOver) {
      // Open and consistent in this process until the takeover: nothing to verify.
    } else if (marker) {
      const checksum = (await checksumFromStart(data, marker.algorithm)) ?? (await fileChecksum(data, marker.algorithm));
      if (checksum !== marker.checksum) {
        return { kind: 'untrusted', cause: 'checksum', reason: 'state file checksum mismatch (it changed after it was closed)' };
      }
    } else {
      const verdict = await verifyInChild(this.path);
      if (typeof verdict === 'string') return { kind: 'untrusted', cause: 'unreadable', reason: `the state file fails verification after an unclean shutdown: ${verdict}` };
      verified = verdict;
    }
    let c: LocalCheckpoint | undefined;
    try {
      this.openEnv();
      c = this.meta!.get(CHECKPOINT_KEY);
    } catch (err) {
      return { kind: 'untrusted', cause: 'unreadable', reason: `the store cannot be opened: ${(err as Error).message}` };
    }
    if (c === undefined) return { kind: 'none' };
    try {
      if (typeof c !== 'object' || c === null || c.format !== LOCAL_STATE_FORMAT) {
        return { kind: 'untrusted', cause: 'format', reason: `checkpoint format ${JSON.stringify((c as { format?: unknown })?.format)}, expected ${LOCAL_STATE_FORMAT}` };
      }
      const { checksum, ...rest } = c;
      if (checkpointChecksum(rest) !== checksum) return { kind: 'untrusted', cause: 'checksum', reason: 'checkpoint checksum mismatch' };
      const differs = sameIdentity(c.identity, this.identity);
      if (differs) return { kind: 'untrusted', cause: 'identity', reason: `the store belongs elsewhere: ${differs}` };
      if (verified) {
        if (verified.count !== c.keys) return { kind: 'untrusted', cause: 'checksum', reason: `${verified.count} entries, the checkpoint says ${c.keys}` };
        if (verified.digest !== c.digest) return { kind: 'untrusted', cause: 'checksum', reason: 'state digest mismatch (an entry changed on disk)' };
      }
      let entries: Map<string, StoredSnapshot> | undefined;
      if (options.readEntries !== false) {
        entries = new Map<string, StoredSnapshot>();
        let n = 0;
        for (const { key, value } of this.entries!.getRange()) {
          if (++n % 4096 === 0) await new Promise((r) => setImmediate(r));
          entries.set(key, unframe(value));
        }
        if (entries.size !== c.keys) return { kind: 'untrusted', cause: 'checksum', reason: `${entries.size} entries, the checkpoint says ${c.keys}` };
      }
      this.digest = Buffer.from(c.digest, 'hex');
      this.keys = c.keys;
      this.checkpoint = c.checkpoint;
      return { kind: 'loaded', entries, checkpoint: c };
    } catch (err) {
      return { kind: 'untrusted', cause: 'unreadable', reason: `the store cannot be read: ${(err as Error).message}` };
    }
  }

  /** The number of entries as of the last write (or load). */
  get size(): number {
    return this.keys;
  }

  /**
   * One key's entry, read now (synchronously: LMDB reads are memory-mapped). Only once loaded or
   * written; a store taken over by a newer recovery throws LocalStateSupersededError.
   */
  get(key: string): StoredSnapshot | undefined {
    const value = this.readable().get(key);
    return value === undefined ? undefined : unframe(value);
  }

  /** Whether the store has an entry for the key (read now). */
  has(key: string): boolean {
    return this.readable().doesExist(key);
  }

  /**
   * The keys with a timer of the look's clock due in its range (after `after`, at or before
   * `until`), as of the last write, earliest first, at most `limit`, leaving out those `skip` says
   * (the keys the partition holds in memory).
   */
  dueKeys(look: { readonly time: TimeDomain; readonly after: number; readonly until: number; readonly limit: number; readonly skip: (key: string) => boolean }): string[] {
    this.readable();
    const keys: string[] = [];
    if (look.limit <= 0) return keys;
    const seen = new Set<string>();
    for (const entry of this.due!.getKeys(dueRange(look.time, look.until, look.after))) {
      const { key } = readDueEntry(entry);
      if (seen.has(key) || look.skip(key)) continue;
      seen.add(key);
      keys.push(key);
      if (keys.length >= look.limit) break;
    }
    return keys;
  }

  /**
   * The earliest due time after `after` of a key `skip` does not leave out (+Infinity: none) — or,
   * past `scan` entries of keys left out, the due time reached: no such key is due before it.
   */
  nextDue(time: TimeDomain, after: number, skip: (key: string) => boolean, scan = 4096): number {
    this.readable();
    for (const entry of this.due!.getKeys(dueAfter(time, after))) {
      const e = readDueEntry(entry);
      if (!skip(e.key) || scan-- <= 0) return e.at;
    }
    return Number.POSITIVE_INFINITY;
  }

  private readable(): Database<Buffer, string> {
    if (this.superseded) throw new LocalStateSupersededError(this.path);
    if (!this.entries) throw new InternalError(`local state: ${this.path} is read before it is loaded`);
    return this.entries;
  }

  /** Deletes the store's files and starts empty. */
  async discard(): Promise<void> {
    await this.hold();
    await this.closeEnv();
    fs.rmSync(this.path, { recursive: true, force: true });
    this.digest = Buffer.alloc(DIGEST_BYTES);
    this.keys = 0;
    this.checkpoint = undefined;
  }

  /**
   * Applies updates and sets the checkpoint (undefined keeps it) in ONE LMDB transaction; `previous`
   * gives each updated key's current entry (for the digest). Resolves once committed (not yet
   * fsynced: a process crash keeps it, a power loss may roll back to an earlier consistent pair).
   */
  async write(updates: readonly LocalUpdate[], previous: (key: string) => StoredSnapshot | undefined, checkpoint: string | undefined, currentAt = Date.now()): Promise<void> {
    await this.hold();
    this.openEnv();
    const digest = Buffer.from(this.digest);
    let keys = this.keys;
    const framed: Array<[string, Buffer | undefined]> = [];
    // The due-time index follows the entries: a key's old timers' entries out, its new ones in.
    const indexed: Array<[remove: Buffer[], add: Buffer[]]> = [];
    const seen = new Map<string, StoredSnapshot | undefined>();
    for (const [key, next] of updates) {
      const before = seen.has(key) ? seen.get(key) : previous(key);
      if (before) {
        xorInto(digest, entryDigest(key, before));
        keys--;
      }
      if (next) {
        xorInto(digest, entryDigest(key, next));
        keys++;
      }
      seen.set(key, next);
      framed.push([key, next ? frame(next) : undefined]);
      indexed.push([before ? dueEntries(key, recordTimers(before.bytes)) : [], next ? dueEntries(key, recordTimers(next.bytes)) : []]);
    }
    const at = checkpoint ?? this.checkpoint;
    if (at === undefined) throw new InternalError('local state: the first write needs a checkpoint');
    const body = { format: LOCAL_STATE_FORMAT, identity: { ...this.identity }, checkpoint: at, currentAt, keys, digest: digest.toString('hex') };
    const record: LocalCheckpoint = { ...body, checksum: checkpointChecksum(body) };
    const entries = this.entries!;
    const meta = this.meta!;
    const due = this.due!;
    await this.env!.transaction(() => {
      for (let i = 0; i < framed.length; i++) {
        const [key, value] = framed[i]!;
        if (value) entries.put(key, value);
        else entries.remove(key);
        const [remove, add] = indexed[i]!;
        for (const e of remove) due.remove(e);
        for (const e of add) due.put(e, INDEXED);
      }
      meta.put(CHECKPOINT_KEY, record);
    });
    this.digest = digest;
    this.keys = keys;
    this.checkpoint = at;
  }

  /** Waits for every committed write to reach the disk, closes, and marks the store closed cleanly. */
  async close(): Promise<void> {
    // Taken over: the newer store closed this one's environment and owns the files now.
    if (this.superseded) return;
    const wasOpen = this.env !== undefined;
    await this.closeEnv();
    if (holders.get(this.path)?.store === this) holders.delete(this.path);
    if (!wasOpen) return;
    const data = path.join(this.path, DATA_FILE);
    if (!fs.existsSync(data)) return;
    const marker = path.join(this.path, CLEAN_MARKER);
    fs.writeFileSync(`${marker}.tmp`, JSON.stringify({ xxh64: await fileChecksum(data, 'xxh64') }));
    fs.renameSync(`${marker}.tmp`, marker);
  }

  /** Makes this store the holder of its path in this process, once the previous holder is closed. */
  private async hold(): Promise<void> {
    if (this.superseded) throw new LocalStateSupersededError(this.path);
    const current = holders.get(this.path);
    if (current?.store === this) return current.ready;
    // A store made before the holder belongs to an older recovery: it never takes the path back.
    if (current && current.store.made > this.made) {
      this.superseded = true;
      throw new LocalStateSupersededError(this.path);
    }
    if (current?.store.env !== undefined) this.handedOver = true;
    const ready = current ? current.store.supersede(current.ready) : Promise.resolve();
    holders.set(this.path, { store: this, ready });
    await ready;
    if (this.superseded) throw new LocalStateSupersededError(this.path);
  }

  /** Taken over: closed once its own predecessor is (its writes in flight land first); refuses everything after. */
  private async supersede(predecessorClosed: Promise<void>): Promise<void> {
    this.superseded = true;
    await predecessorClosed.catch(() => undefined);
    await this.closeEnv().catch(() => undefined);
  }

  private openEnv(): void {
    if (this.env) return;
    fs.mkdirSync(this.path, { recursive: true });
    // Open for writing: no longer closed cleanly until close() says so again.
    fs.rmSync(path.join(this.path, CLEAN_MARKER), { force: true });
    const env = open({ path: this.path, noSubdir: false, compression: false, maxDbs: 4 });
    try {
      this.entries = env.openDB<Buffer, string>({ name: 'entries', encoding: 'binary', compression: false });
      this.meta = env.openDB<LocalCheckpoint, string>({ name: 'meta', encoding: 'msgpack', compression: false });
      this.due = env.openDB<Buffer, Buffer>({ name: 'due', keyEncoding: 'binary', encoding: 'binary', compression: false });
    } catch (err) {
      void env.close();
      throw err;
    }
    this.env = env;
  }

  private async closeEnv(): Promise<void> {
    const env = this.env;
    this.env = undefined;
    this.entries = undefined;
    this.meta = undefined;
    this.due = undefined;
    if (!env) return;
    try {
      await env.flushed;
    } finally {
      await env.close();
    }
  }
}

/** How the clean marker checksums the data file: xxh64 (what close writes); sha256 (stores closed by earlier versions). */
type ChecksumAlgorithm = 'xxh64' | 'sha256';

function readMarker(file: string): { algorithm: ChecksumAlgorithm; checksum: string } | undefined {
  try {
    const m = JSON.parse(fs.readFileSync(file, 'utf8')) as { xxh64?: unknown; sha256?: unknown };
    if (typeof m.xxh64 === 'string') return { algorithm: 'xxh64', checksum: m.xxh64 };
    return { algorithm: 'sha256', checksum: typeof m.sha256 === 'string' ? m.sha256 : '' };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    return { algorithm: 'xxh64', checksum: '' }; // a damaged marker: the data file cannot match it
  }
}

/** A data file's checksum computed at the worker's start (readLocalCheckpoints' child), with the file's identity then. */
export interface StartChecksum {
  readonly xxh64: string;
  readonly size: string;
  readonly mtimeNs: string;
  readonly ino: string;
}

/** The checksums the start-up child is computing, by data file (one read each: taken by the first restore). */
const startChecksums = new Map<string, Promise<StartChecksum | undefined>>();

/** Registers the start-up child's checksum of `dataFile` (in flight): a restore of it takes it instead of reading the file again. */
export function offerStartChecksum(dataFile: string, checksum: Promise<StartChecksum | undefined>): void {
  startChecksums.set(dataFile, checksum);
}

/**
 * The start-up child's xxh64 of `dataFile`, if it computed one of the file as it is now (same size,
 * modification time and inode: nothing wrote it since — this process holds the state directory's
 * lock, and its store opens the file for writing only after this check). Undefined otherwise.
 */
async function checksumFromStart(dataFile: string, algorithm: ChecksumAlgorithm): Promise<string | undefined> {
  const offered = startChecksums.get(dataFile);
  if (!offered || algorithm !== 'xxh64') return undefined;
  startChecksums.delete(dataFile);
  const c = await offered.catch(() => undefined);
  if (!c) return undefined;
  const st = fs.statSync(dataFile, { bigint: true });
  return String(st.size) === c.size && String(st.mtimeNs) === c.mtimeNs && String(st.ino) === c.ino ? c.xxh64 : undefined;
}

let xxhash: ReturnType<typeof xxhashWasm> | undefined;

/**
 * The checksum of a file, read in 1 MiB chunks into one buffer (the process holds one chunk, not
 * the file, and makes no garbage per chunk: a worker checking many large stores at once stays small
 * and its collector idle); other partitions go on between chunks. xxh64 (xxhash-wasm): ≈ 2.8 GB/s
 * here against SHA-256's ≈ 0.32, which made a restart's store check grow with the state (1M keys
 * over 24 stores: ≈ 1 s of the main thread before the first fold, a stream's buffer per chunk
 * another ≈ 0.4 s). It detects a file changed or damaged after the clean close, as SHA-256 did; no
 * adversary is in scope.
 */
async function fileChecksum(file: string, algorithm: ChecksumAlgorithm): Promise<string> {
  let hash: { update(data: Uint8Array): unknown };
  let digest: () => string;
  if (algorithm === 'sha256') {
    const h = createHash('sha256');
    hash = h;
    digest = () => h.digest('hex');
  } else {
    xxhash ??= xxhashWasm();
    const h = (await xxhash).create64();
    hash = h;
    digest = () => h.digest().toString(16).padStart(16, '0');
  }
  const fh = await fs.promises.open(file, 'r');
  try {
    const chunk = Buffer.allocUnsafe(1 << 20);
    for (let position = 0; ; ) {
      const { bytesRead } = await fh.read(chunk, 0, chunk.length, position);
      if (bytesRead === 0) break;
      hash.update(bytesRead === chunk.length ? chunk : chunk.subarray(0, bytesRead));
      position += bytesRead;
    }
  } finally {
    await fh.close();
  }
  return digest();
}

/** The entries' count and XOR digest, as a verifying child read them. */
interface EntriesDigest {
  readonly count: number;
  readonly digest: string;
}

/**
 * Reads every entry in a child process and computes their count and digest there (entryDigest's
 * MD5 over key, offset and bytes, written out for a plain `node -e`): the entries, or what went
 * wrong. The main thread neither risks a damaged file nor spends the read.
 */
async function verifyInChild(dir: string): Promise<EntriesDigest | string> {
  const script = `
    const { createHash } = require('node:crypto');
    const { open } = require(${JSON.stringify(require.resolve('lmdb'))});
    const env = open({ path: ${JSON.stringify(dir)}, noSubdir: false, readOnly: true, maxDbs: 4, compression: false });
    const meta = env.openDB({ name: 'meta', encoding: 'binary', compression: false });
    for (const { value } of meta.getRange()) if (value.length < 0) throw new Error('unreachable');
    const entries = env.openDB({ name: 'entries', encoding: 'binary', compression: false });
    const digest = Buffer.alloc(${DIGEST_BYTES});
    let count = 0;
    for (const { key, value } of entries.getRange()) {
      if (value.length < 8) throw new Error('entry of ' + value.length + ' bytes is shorter than its header');
      const k = Buffer.from(key, 'utf8');
      const head = Buffer.allocUnsafe(8);
      head.writeUInt32BE(k.length, 0);
      head.writeUInt32BE(value.length - 8, 4);
      const d = createHash('md5').update(head).update(k).update(value.readBigInt64BE(0).toString()).update('\\u0000').update(value.subarray(8)).digest();
      for (let i = 0; i < ${DIGEST_BYTES}; i++) digest[i] ^= d[i];
      count++;
    }
    process.stdout.write(JSON.stringify({ count, digest: digest.toString('hex') }));
  `;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    let out = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('error', (e) => resolve(e.message));
    child.on('close', (code, signal) => {
      if (code === 0) {
        try {
          const read = JSON.parse(out) as EntriesDigest;
          resolve({ count: read.count, digest: read.digest });
        } catch {
          resolve(`the reader's answer is not readable: ${out.slice(0, 200)}`);
        }
      } else resolve(signal ? `the reader died of ${signal}` : `the reader failed: ${err.trim().split('\n').slice(-1)[0] ?? `exit ${code}`}`);
    });
  });
}
