import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { defaults } from '../../../config/env';
import { readInfraSettings, VERSIONS } from '../../../infra/settings';
import { searchAttributes } from '../../../workflows/searchAttributes';

// Docker does not run on this project's machines, so docker-compose.yml is checked here against
// the local scripts instead: same server versions, same ports, same search attributes.
const compose = parse(fs.readFileSync(path.join(__dirname, '../../../docker-compose.yml'), 'utf8')) as {
  services: Record<string, { image: string; ports?: string[]; command?: string[]; environment?: Record<string, unknown> }>;
};
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
    const expected = Object.values(searchAttributes).map((k) => `${k.name}=${k.type === 'INT' ? 'Int' : 'Keyword'}`);
    expect(declared.sort()).toEqual(expected.sort());
  });

  test('the worker reaches the servers by their service names', () => {
    const env = compose.services.worker?.environment ?? {};
    expect(String(env.KAFKA_BROKERS)).toMatch(/^kafka:/);
    expect(String(env.TEMPORAL_ADDRESS)).toBe('temporal:7233');
    expect(String(env.CASSANDRA_CONTACT_POINTS)).toBe('cassandra:9042');
  });
});
