/**
 * The checkpoints of the local stores a worker finds in its state directory at start (left by its
 * previous run): the group's assignor prefers, for each partition nobody holds, the member with the
 * freshest copy — so a whole group restarting gets its own partitions back and restores deltas.
 * Read in a child process, each store opened read-only (never in this process: lmdb-js shares one
 * environment per path in a process, and the owner's store opens these paths later; and a damaged
 * file can crash its reader). A hint only: the restore checks a store before it trusts it.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { type LocalStateIdentity, localStatePath, offerStartChecksum, type StartChecksum } from './local-state';

interface Store {
  readonly partition: number;
  readonly path: string;
}

/**
 * By partition: the checkpoint of each store of `id` under `dir` (a Cassandra store's: the offset its
 * commits cover); stores that cannot be read are left out. The same child also computes each
 * cleanly closed store's file checksum, on the other core while the worker starts, for the
 * partition's restore to take (offerStartChecksum) instead of reading the file on the main thread
 * in the first record's way.
 */
export async function readLocalCheckpoints(dir: string, id: Omit<LocalStateIdentity, 'partition' | 'transactionalId'>, partitions: readonly number[]): Promise<Map<number, string>> {
  let left: Store[] = partitions
    .map((partition) => ({ partition, path: localStatePath(dir, { ...id, partition, transactionalId: '' }) }))
    .filter((s) => fs.existsSync(path.join(s.path, 'data.mdb')));
  const sums = new Map<string, (c: StartChecksum | undefined) => void>();
  for (const s of left) {
    const file = path.join(s.path, 'data.mdb');
    offerStartChecksum(file, new Promise((resolve) => sums.set(file, resolve)));
  }
  const found = new Map<number, string>();
  try {
    // A store that crashes the reader (SIGSEGV) is skipped; the ones after it get a new reader.
    while (left.length > 0) {
      const { read, reached } = await readInChild(left, (file, c) => sums.get(file)?.(c));
      for (const [p, c] of read) found.set(p, c);
      if (reached < 0) break; // the reader did not start: no hints
      left = left.slice(reached + 1);
    }
  } finally {
    for (const resolve of sums.values()) resolve(undefined); // not computed: the restore reads the file
  }
  return found;
}

/**
 * Reads `stores` in order in one child; `reached`: the index of the last store it started on (-1:
 * none). `onChecksum`: a cleanly closed store's data file checksum (xxh64) with its identity, as each comes.
 */
function readInChild(stores: readonly Store[], onChecksum: (dataFile: string, c: StartChecksum) => void): Promise<{ read: Map<number, string>; reached: number }> {
  // One line per store as it goes: "<i>" when it starts on it, "<i> sum <xxh64> <size> <mtimeNs>
  // <ino>" once it has the data file's checksum (a store with an xxh64 clean marker only; the
  // file's identity read before and after, the same), "<i> <checkpoint>" once read.
  const script = `
    const fs = require('node:fs');
    const path = require('node:path');
    const { open } = require(${JSON.stringify(require.resolve('lmdb'))});
    const stores = ${JSON.stringify(stores)};
    const identity = (file) => { const st = fs.statSync(file, { bigint: true }); return st.size + ' ' + st.mtimeNs + ' ' + st.ino; };
    (async () => {
    const xxhash = await require(${JSON.stringify(require.resolve('xxhash-wasm'))})();
    for (let i = 0; i < stores.length; i++) {
      fs.writeSync(1, i + '\\n');
      try {
        const data = path.join(stores[i].path, 'data.mdb');
        const marker = JSON.parse(fs.readFileSync(path.join(stores[i].path, 'clean.json'), 'utf8'));
        if (typeof marker.xxh64 === 'string') {
          const before = identity(data);
          const h = xxhash.create64();
          const chunk = Buffer.allocUnsafe(1 << 20);
          const fd = fs.openSync(data, 'r');
          try {
            for (let at = 0, n; (n = fs.readSync(fd, chunk, 0, chunk.length, at)) > 0; at += n) h.update(n === chunk.length ? chunk : chunk.subarray(0, n));
          } finally {
            fs.closeSync(fd);
          }
          if (identity(data) === before) fs.writeSync(1, i + ' sum ' + h.digest().toString(16).padStart(16, '0') + ' ' + before + '\\n');
        }
      } catch {}
      try {
        const env = open({ path: stores[i].path, noSubdir: false, readOnly: true, maxDbs: 4, compression: false });
        const c = env.openDB({ name: 'meta', encoding: 'msgpack', compression: false }).get('checkpoint');
        if (c && typeof c.checkpoint === 'string' && /^[0-9]+$/.test(c.checkpoint)) fs.writeSync(1, i + ' ' + c.checkpoint + '\\n');
        else if (c && typeof c.checkpoint === 'string' && c.checkpoint.startsWith('{')) {
          // A Cassandra store's checkpoint: how far its commits go is its freshness.
          const covered = JSON.parse(c.checkpoint).covered;
          if (typeof covered === 'string' && /^[0-9]+$/.test(covered)) fs.writeSync(1, i + ' ' + covered + '\\n');
        }
        env.close();
      } catch {}
    }
    })();
  `;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('error', () => resolve({ read: new Map(), reached: -1 }));
    child.on('close', () => {
      const read = new Map<number, string>();
      let reached = -1;
      for (const line of out.split('\n')) {
        if (line === '') continue;
        const [i, checkpoint, xxh64, size, mtimeNs, ino] = line.split(' ');
        if (checkpoint === undefined) reached = Number(i);
        else if (checkpoint === 'sum') {
          if (xxh64 && size && mtimeNs && ino) onChecksum(path.join(stores[Number(i)]!.path, 'data.mdb'), { xxh64, size, mtimeNs, ino });
        } else read.set(stores[Number(i)]!.partition, checkpoint);
      }
      resolve({ read, reached });
    });
  });
}
