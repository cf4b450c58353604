import { policies } from 'cassandra-driver';
import { backendClientOptions, RECONNECT_MAX_MS } from '../../../../persistence/cassandra/client-options';

const base = { contactPoints: ['127.0.0.1:9042'], localDataCenter: 'datacenter1' };

/** The first `n` waits of a reconnection schedule. */
function waits(policy: policies.reconnection.ReconnectionPolicy, n: number): number[] {
  const schedule = policy.newSchedule();
  return Array.from({ length: n }, () => schedule.next().value as number);
}

describe("the backend's own Cassandra client", () => {
  it('reconnects to a node that went down at least every 2 s (the driver default waits up to 10 minutes)', () => {
    const options = backendClientOptions(base, undefined);
    const schedule = waits(options.policies!.reconnection!, 30);
    expect(Math.max(...schedule)).toBeLessThanOrEqual(RECONNECT_MAX_MS * 1.15);
    // A whole minute of outage is covered by attempts no more than 2.3 s apart.
    expect(schedule.reduce((a, b) => a + b, 0)).toBeGreaterThan(45_000);
    expect(options.contactPoints).toEqual(base.contactPoints);
  });

  it("keeps the caller's options and policies over the defaults", () => {
    const mine = new policies.reconnection.ConstantReconnectionPolicy(100);
    const options = backendClientOptions(base, { policies: { reconnection: mine }, socketOptions: { readTimeout: 3000 } });
    expect(options.policies!.reconnection).toBe(mine);
    expect(options.socketOptions).toEqual({ readTimeout: 3000 });
    expect(options.localDataCenter).toBe('datacenter1');
  });
});
