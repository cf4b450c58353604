import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { type ISocketFactory, Kafka } from 'kafkajs';
import { TcpProxy } from '../../chaos/tcp-proxy';
import { formatHostPort, readEnv } from '../../config/env';
import type { KafkaClient } from '../../kafka/client';

/** Addresses of the real servers the integration tests talk to (same variables as the CLI). */
export const env = readEnv();
export const kafkaBrokers = env.kafkaBrokers.map(formatHostPort);
export const temporalAddress = formatHostPort(env.temporalAddress);
export const temporalNamespace = env.temporalNamespace;
export const cassandraContactPoints = env.cassandraContactPoints.map(formatHostPort);

/** A name no other test (or earlier run) uses: topics, groups, task queues, keyspaces. */
export const unique = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`;

/**
 * A started proxy in front of `client`'s first broker that follows Kafka requests (chaos/tcp-proxy.ts:
 * `arm` a trigger, `refuse` connections); `proxiedClient` connects through it.
 */
export async function kafkaProxy(client: KafkaClient): Promise<TcpProxy> {
  const [host, port] = client.brokers[0]!.split(':');
  const proxy = new TcpProxy('kafka', 0, { host: host!, port: Number(port) }, '127.0.0.1', true);
  await proxy.start();
  return proxy;
}

/**
 * `client` with its kafkajs instance (producers, group consumers, admin) connected through
 * `proxy`; the group-less readers built on `client.brokers` still connect directly. The broker
 * advertises its own address in metadata, so a client merely bootstrapped through the proxy would
 * connect to the broker directly afterwards: every connection goes to the proxy instead, whatever
 * broker address it asks for (plaintext listeners: TLS is not proxied).
 */
export function proxiedClient(client: KafkaClient, proxy: TcpProxy, options: { requestTimeout?: number } = {}): KafkaClient {
  const socketFactory: ISocketFactory = ({ onConnect }) => net.connect({ host: '127.0.0.1', port: proxy.port }, onConnect);
  const kafka = new Kafka({
    brokers: [`127.0.0.1:${proxy.port}`],
    clientId: `${client.clientId}-proxied`,
    logLevel: client.logLevel,
    logCreator: client.logCreator,
    socketFactory,
    ...client.connection,
    ...(options.requestTimeout !== undefined ? { requestTimeout: options.requestTimeout } : {}),
  });
  return { ...client, kafka };
}
