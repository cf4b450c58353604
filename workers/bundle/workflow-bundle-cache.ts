import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { BuiltWorkflowBundle } from './workflow-bundle-build';

/**
 * The on-disk cache of one workflow bundle: one file, written to a temporary name and renamed into
 * place (a reader sees the old file or the new one, never half of one). Its first line names the
 * format, its second is the manifest — the cache key, the content hash of every file webpack read,
 * the paths it looked for and did not find, the code's hash and length — and the rest is the code.
 * A bundle is used only if every one of those still holds.
 */
const MAGIC = 'kafka-flow-temporal workflow bundle 1';

interface Manifest {
  key: string;
  /** [path, sha256 of its content] of every file webpack read. */
  files: Array<[string, string]>;
  /** Paths webpack looked for and did not find: each must still be absent. */
  absent: string[];
  codeSha256: string;
  codeLength: number;
}

export const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

/** The cache file of a key in `dir`. */
export function cacheFile(dir: string, key: string): string {
  return path.join(dir, `workflow-bundle-${key.slice(0, 24)}.bundle`);
}

/** Why a cached bundle cannot be used, or its code. */
export type CacheLookup = { code: string } | { miss: 'absent' | 'corrupt' | 'stale'; why: string };

/** Reads the cached bundle of `key`, checking the file itself and every input it was made from. */
export function readCachedBundle(file: string, key: string): CacheLookup {
  let raw: Buffer;
  try {
    raw = fs.readFileSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? { miss: 'absent', why: 'no cached bundle' } : { miss: 'corrupt', why: `unreadable: ${code ?? String(err)}` };
  }
  const first = raw.indexOf(0x0a);
  const second = first < 0 ? -1 : raw.indexOf(0x0a, first + 1);
  if (second < 0 || raw.subarray(0, first).toString('utf8') !== MAGIC) return { miss: 'corrupt', why: 'not a bundle file of this format' };
  let manifest: Manifest;
  try {
    manifest = JSON.parse(raw.subarray(first + 1, second).toString('utf8')) as Manifest;
  } catch {
    return { miss: 'corrupt', why: 'manifest is not JSON' };
  }
  if (typeof manifest !== 'object' || manifest === null) return { miss: 'corrupt', why: 'manifest is not an object' };
  if (manifest.key !== key) return { miss: 'stale', why: 'made with other options or bundler versions' };
  const codeBytes = raw.subarray(second + 1);
  if (codeBytes.length !== manifest.codeLength || sha256(codeBytes) !== manifest.codeSha256) {
    return { miss: 'corrupt', why: `code is ${codeBytes.length} bytes, the manifest says ${manifest.codeLength} with another hash (truncated or overwritten)` };
  }
  const changed = changedInput(manifest);
  if (changed) return { miss: 'stale', why: changed };
  return { code: codeBytes.toString('utf8') };
}

/** The first input that is not as it was when the bundle was made, or undefined. */
function changedInput(manifest: Manifest): string | undefined {
  if (!Array.isArray(manifest.files) || !Array.isArray(manifest.absent)) return 'manifest lists no inputs';
  for (const [file, hash] of manifest.files) {
    if (typeof file !== 'string') return 'manifest names a file that is not a path';
    let content: Buffer;
    try {
      content = fs.readFileSync(file);
    } catch {
      return `${file} is gone`;
    }
    if (sha256(content) !== hash) return `${file} changed`;
  }
  for (const p of manifest.absent) if (fs.existsSync(p)) return `${p} appeared (module resolution may differ)`;
  return undefined;
}

/**
 * Writes the bundle of `key` with its manifest: to a temporary file in the same directory, then
 * renamed over the cache file, so concurrent writers each replace it whole. The inputs are hashed
 * now, after the build; an input modified since `buildStartedAt` may differ from what webpack read,
 * so then nothing is written (the reason is returned) and the next start builds again.
 */
export function writeCachedBundle(file: string, key: string, built: BuiltWorkflowBundle, buildStartedAt: number): string | undefined {
  const files: Array<[string, string]> = [];
  for (const f of built.files) {
    // Read, then stat: a file not modified since the build started holds what webpack read.
    const content = fs.readFileSync(f);
    if (fs.statSync(f).mtimeMs >= buildStartedAt) return `${f} was modified during the build`;
    files.push([f, sha256(content)]);
  }
  const codeBytes = Buffer.from(built.code, 'utf8');
  const manifest: Manifest = { key, files, absent: built.absent, codeSha256: sha256(codeBytes), codeLength: codeBytes.length };
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
  try {
    fs.writeFileSync(tmp, Buffer.concat([Buffer.from(`${MAGIC}\n${JSON.stringify(manifest)}\n`, 'utf8'), codeBytes]));
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
  return undefined;
}
