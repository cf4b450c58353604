import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { KafkaFlowError } from '../config/errors';

const run = promisify(execFile);

export interface MavenArtifact {
  groupId: string;
  artifactId: string;
  version: string;
}

/**
 * Collects an artifact and its runtime dependencies from Maven Central into `libDir` with
 * `mvn dependency:copy-dependencies`. Idempotent: a marker file records a finished download, so a
 * half-done one (killed mid-way) is redone rather than trusted. Maven's own repository lives in
 * the project cache too, so nothing outside the git-ignored folder is needed.
 */
export async function fetchJars(opts: {
  cacheDir: string;
  libDir: string;
  artifacts: MavenArtifact[];
  log: (line: string) => void;
}): Promise<{ fetched: boolean }> {
  const marker = path.join(opts.libDir, '.complete');
  const wanted = opts.artifacts.map((a) => `${a.groupId}:${a.artifactId}:${a.version}`).join('\n');
  if (fs.existsSync(marker) && fs.readFileSync(marker, 'utf8') === wanted) return { fetched: false };
  fs.rmSync(opts.libDir, { recursive: true, force: true });
  const work = `${opts.libDir}.pom`;
  fs.mkdirSync(work, { recursive: true });
  const deps = opts.artifacts
    .map(
      (a) =>
        `<dependency><groupId>${a.groupId}</groupId><artifactId>${a.artifactId}</artifactId><version>${a.version}</version></dependency>`,
    )
    .join('\n    ');
  fs.writeFileSync(
    path.join(work, 'pom.xml'),
    `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-flow-temporal.infra</groupId><artifactId>${path.basename(opts.libDir)}</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    ${deps}
  </dependencies>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId><artifactId>maven-dependency-plugin</artifactId><version>3.8.1</version>
  </plugin></plugins></build>
</project>
`,
  );
  opts.log(`fetching ${opts.artifacts.map((a) => `${a.artifactId}:${a.version}`).join(', ')} from Maven Central`);
  try {
    await run(
      'mvn',
      [
        '-q',
        '-B',
        `-Dmaven.repo.local=${path.join(opts.cacheDir, 'm2')}`,
        'dependency:copy-dependencies',
        `-DoutputDirectory=${opts.libDir}`,
        '-DincludeScope=runtime',
      ],
      { cwd: work, maxBuffer: 64 * 1024 * 1024 },
    );
  } catch (err) {
    const e = err as { code?: string; stdout?: string; stderr?: string };
    if (e.code === 'ENOENT') {
      throw new KafkaFlowError('MAVEN_MISSING', 'mvn not found: install Maven (apt-get install -y maven) to fetch the servers');
    }
    const tail = `${e.stdout ?? ''}${e.stderr ?? ''}`.trim().split('\n').slice(-15).join('\n');
    throw new KafkaFlowError('FETCH_FAILED', `Maven could not fetch ${path.basename(opts.libDir)}:\n${tail}`, { cause: err });
  }
  fs.writeFileSync(marker, wanted);
  return { fetched: true };
}

export const classpath = (libDir: string): string =>
  fs
    .readdirSync(libDir)
    .filter((f) => f.endsWith('.jar'))
    .sort()
    .map((f) => path.join(libDir, f))
    .join(path.delimiter);
