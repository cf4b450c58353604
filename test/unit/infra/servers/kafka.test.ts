import { kafkaJvmArgs, kafkaServerProperties } from '../../../../infra/servers/kafka';

const base = { host: '127.0.0.1', port: 9092, controllerPort: 9093, logDirs: '/data/log', comment: 'one\ntwo' };

test('a single-node KRaft broker+controller: PLAINTEXT and CONTROLLER only', () => {
  const props = kafkaServerProperties(base);
  expect(props.startsWith('# one\n# two\n')).toBe(true);
  expect(props).toContain('listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n');
  expect(props).toContain('advertised.listeners=PLAINTEXT://127.0.0.1:9092\n');
  expect(props).toContain('listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n');
  expect(props).toContain('log.dirs=/data/log\n');
  expect(props).toContain('transaction.state.log.replication.factor=1\n');
});

test('an extra listener is bound on its port and advertised at another (the chaos proxy)', () => {
  const props = kafkaServerProperties({ ...base, extraListener: { name: 'PROXIED', port: 9094, advertisedPort: 9095 } });
  expect(props).toContain('listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,PROXIED://127.0.0.1:9094\n');
  expect(props).toContain('advertised.listeners=PLAINTEXT://127.0.0.1:9092,PROXIED://127.0.0.1:9095\n');
  expect(props).toContain('listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,PROXIED:PLAINTEXT\n');
});

test('the broker JVM command line: heap, extra flags before the classpath, main class and config last', () => {
  const args = kafkaJvmArgs({ heapMb: 512, log4j: '/l.properties', logsDir: '/logs', classpath: 'a.jar:b.jar', configFile: '/s.properties', jvmFlags: ['-XX:TieredStopAtLevel=1'] });
  expect(args.slice(0, 4)).toEqual(['-Xms512m', '-Xmx512m', '-XX:+UseG1GC', '-XX:TieredStopAtLevel=1']);
  expect(args.slice(-4)).toEqual(['-cp', 'a.jar:b.jar', 'kafka.Kafka', '/s.properties']);
  expect(args).toContain('-Dlog4j2.configurationFile=/l.properties');
  expect(args).toContain('-Dkafka.logs.dir=/logs');
});
