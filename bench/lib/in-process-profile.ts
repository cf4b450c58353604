// A V8 CPU profile of a stretch of this process (node:inspector), for benchmarks that time their
// contestants in-process (bench:recovery): `node --cpu-prof` would profile the whole run, writes
// and other contestants included. Summarize with bench/lib/profile-summary.ts.
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import path from 'node:path';

export interface RunningProfile {
  /** Stops the profiler and writes the profile to `<dir>/<name>.cpuprofile`; returns the file. */
  stop(name: string): Promise<string>;
}

function post<T>(session: Session, method: string, params?: object): Promise<T> {
  return new Promise((resolve, reject) => {
    session.post(method, params ?? {}, (err, result) => (err ? reject(err) : resolve(result as T)));
  });
}

/** Starts profiling this process, a sample every 100 µs (`--cpu-prof`'s 1 ms is coarse for runs under a second). */
export async function startProfile(dir: string): Promise<RunningProfile> {
  const session = new Session();
  session.connect();
  await post(session, 'Profiler.enable');
  await post(session, 'Profiler.setSamplingInterval', { interval: 100 });
  await post(session, 'Profiler.start');
  return {
    async stop(name: string): Promise<string> {
      try {
        const { profile } = await post<{ profile: unknown }>(session, 'Profiler.stop');
        mkdirSync(dir, { recursive: true });
        const file = path.join(dir, `${name}.cpuprofile`);
        writeFileSync(file, JSON.stringify(profile));
        return file;
      } finally {
        session.disconnect();
      }
    },
  };
}
