import net from 'node:net';

/**
 * True when something accepts TCP connections on host:port. Shared by the worker (a fast
 * "no broker answers" check before kafkajs's retries) and `infra` (is a server up?).
 */
export function portOpen(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
