/**
 * A local state directory belongs to one worker process: an exclusive lock on `<dir>/.lock`,
 * taken when the process's Kafka backend is built (the worker's start) and held until the backend
 * closes (the worker's stop) or the process exits.
 *
 * The lock is an OS lock (on Linux an open-file-description lock, `fcntl(F_OFD_SETLK)`, through
 * `fs-native-extensions`; `flock` on macOS, `LockFileEx` on Windows), so the kernel releases it
 * when the holding process dies, however it dies: a worker restarted right after a kill -9 takes
 * it at once, and there is no stale lock to detect or clean up. The file itself stays; after
 * taking the lock the holder writes its pid, host and start time into it, which is what a second
 * process names in its error. Within one process the lock is taken once per directory and counted
 * (a flow's backends of several input topics share it; the last one to close releases it).
 *
 * Works across containers that mount the same volume on one host (one kernel). On network file
 * systems it is only as good as their lock support (NFSv4 supports it; some FUSE mounts do not).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KafkaFlowError } from '../../config/errors';

interface NativeLocks {
  tryLock(fd: number, offset?: number, length?: number, opts?: { shared?: boolean }): boolean;
  unlock(fd: number, offset?: number, length?: number): void;
}
// No type declarations ship with it; this is the part we use.
const locks = require('fs-native-extensions') as NativeLocks;

export const STATE_DIR_LOCK_FILE = '.lock';

/** Who holds a state directory, as its lock file says. */
export interface StateDirHolder {
  readonly pid?: number;
  readonly host?: string;
  /** When the holder took the lock (ISO time). */
  readonly since?: string;
}

/** Another process holds the local state directory. */
export class StateDirLockedError extends KafkaFlowError {
  readonly dir: string;
  readonly holder: StateDirHolder | undefined;
  constructor(dir: string, holder: StateDirHolder | undefined) {
    const who =
      holder?.pid !== undefined
        ? `pid ${holder.pid}${holder.host ? ` on host ${holder.host}` : ''}${holder.since ? ` (since ${holder.since})` : ''}`
        : 'another process (its pid is not recorded yet)';
    super(
      'STATE_DIR_LOCKED',
      `the local state directory ${dir} is in use by ${who}; each worker process needs its own state directory: give every worker its own KFT_STATE_DIR (or persistence.localState.dir)`,
    );
    this.dir = dir;
    this.holder = holder;
  }
}

/** One hold of this process's lock on a state directory. */
export interface StateDirLock {
  readonly dir: string;
  readonly file: string;
  /**
   * Gives this hold up (once; later calls do nothing). The directory is unlocked when the last
   * hold in the process is released (a backend's close), or when the process exits, whatever
   * the cause.
   */
  release(): void;
}

interface Held {
  readonly fd: number;
  holds: number;
}

const held = new Map<string, Held>();

/**
 * Takes this process's exclusive lock on `dir` (created if missing), or one more hold of the lock
 * it already has. Throws StateDirLockedError at once when another live process holds it.
 */
export function lockStateDir(dir: string): StateDirLock {
  fs.mkdirSync(dir, { recursive: true });
  const real = fs.realpathSync(dir);
  const file = path.join(real, STATE_DIR_LOCK_FILE);
  let entry = held.get(real);
  if (!entry) {
    const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644);
    let locked = false;
    try {
      locked = locks.tryLock(fd);
    } finally {
      if (!locked) fs.closeSync(fd);
    }
    if (!locked) throw new StateDirLockedError(real, readHolder(file));
    const me: StateDirHolder = { pid: process.pid, host: os.hostname(), since: new Date().toISOString() };
    fs.ftruncateSync(fd, 0);
    fs.writeSync(fd, `${JSON.stringify(me)}\n`, 0);
    entry = { fd, holds: 0 };
    held.set(real, entry);
  }
  const mine = entry;
  mine.holds++;
  let released = false;
  return {
    dir: real,
    file,
    release() {
      if (released) return;
      released = true;
      if (--mine.holds > 0) return;
      held.delete(real);
      try {
        fs.ftruncateSync(mine.fd, 0); // while still ours: the next holder writes its own line
        locks.unlock(mine.fd);
      } finally {
        fs.closeSync(mine.fd);
      }
    },
  };
}

/** What the lock file says about its holder (undefined when empty or unreadable). */
export function readHolder(file: string): StateDirHolder | undefined {
  try {
    const h = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
    return {
      pid: typeof h.pid === 'number' ? h.pid : undefined,
      host: typeof h.host === 'string' ? h.host : undefined,
      since: typeof h.since === 'string' ? h.since : undefined,
    };
  } catch {
    return undefined;
  }
}
