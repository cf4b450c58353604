import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { defaults } from '../../../config/env';
import { readInfraSettings, VERSIONS } from '../../../infra/settings';
import { searchAttributes } from '../../../workflows/search-attributes';

// Docker does not run on this project's machines, so docker-compose.yml is checked here against
// the local scripts instead: same server versions, same ports, same search attributes.
// `merge: true`: the worker services share their settings through a YAML merge key (`<<: *worker`),
// which Docker Compose resolves.
const compose = parse(fs.readFileSync(path.join(__dirname, '../../../docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<
    string,
    { image: string; ports?: string[]; command?: string[]; environment?: Record<string, unknown>; volumes?: string[]; deploy?: { replicas?: number } }
  >;
  volumes?: Record<string, unknown>;
};
const workers = Object.entries(compose.services).filter(([, s]) => s.command?.includes('worker'));
const settings = readInfraSettings({});
const hostPorts = (service: string) => (compose.services[service]?.ports ?? []).map((p) => Number(p.split(':')[0]));

describe('docker-compose.yml agrees with infra', () => {
  test('server versions', () => {
    expect(compose.services.kafka?.image).toBe(`apache/kafka:${VERSIONS.kafka}`);
    expect(compose.services.temporal?.image).toBe(`temporalio/temporal:${VERSIONS.temporalCli}`);
    expect(compose.services.cassandra?.image).toBe(`cassandra:${VERSIONS.cassandra}`);
  });

  test('ports', () => {
    expect(hostPorts('kafka')).toEqual([settings.kafka.port]);
    expect(hostPorts('temporal')).toEqual([settings.temporal.port, settings.temporal.uiPort]);
    expect(hostPorts('cassandra')).toEqual([settings.cassandra.port]);
    expect(`127.0.0.1:${settings.kafka.port}`).toBe(defaults.KAFKA_BROKERS);
  });

  test('the Temporal server registers every custom search attribute of the partition workflows', () => {
    const command = compose.services.temporal?.command ?? [];
    const declared = command.filter((_, i) => command[i - 1] === '--search-attribute');
    const typeName = { INT: 'Int', DOUBLE: 'Double', KEYWORD: 'Keyword' } as Record<string, string>;
    const expected = Object.values(searchAttributes).map((k) => `${k.name}=${typeName[k.type]}`);
    expect(declared.sort()).toEqual(expected.sort());
  });

  test('the workers reach the servers by their service names', () => {
    expect(workers.length).toBeGreaterThanOrEqual(2);
    for (const [, worker] of workers) {
      const env = worker.environment ?? {};
      expect(String(env.KAFKA_BROKERS)).toMatch(/^kafka:/);
      expect(String(env.TEMPORAL_ADDRESS)).toBe('temporal:7233');
      expect(String(env.CASSANDRA_CONTACT_POINTS)).toBe('cassandra:9042');
    }
  });

  test('each worker has its own local state volume (a state directory belongs to one worker process)', () => {
    const stateVolumes = workers.map(([name, worker]) => {
      const dir = String(worker.environment?.KFT_STATE_DIR ?? '');
      expect(dir).not.toBe('');
      const mount = (worker.volumes ?? []).find((v) => v.split(':')[1] === dir);
      if (!mount) throw new Error(`service ${name} mounts no volume at its KFT_STATE_DIR ${dir}`);
      const volume = mount.split(':')[0]!;
      expect(Object.keys(compose.volumes ?? {})).toContain(volume); // a named volume, not a host path
      expect(worker.deploy?.replicas ?? 1).toBe(1); // replicas of one service would share it
      return volume;
    });
    expect(new Set(stateVolumes).size).toBe(workers.length);
  });
});
