import { collectDefaultMetrics, Registry } from 'prom-client';
import { FlowMetrics } from '../../flow/metrics';
import type { PartitionFigures } from '../runtime/flow-runtime';
import { registerPartitionGauges } from './partition-gauges';

/**
 * The registry a worker serves at `/metrics`: Node's default process metrics, the engine's
 * (flow/metrics.ts) and the partition gauges (partition-gauges.ts); the backend adds its own when
 * it is created (persistence/kafka/metrics.ts, persistence/cassandra/metrics.ts). The Grafana
 * dashboard (ops/grafana/) queries these names; a unit test checks it against this registry.
 */
export function workerRegistry(flow: string, figures: () => readonly PartitionFigures[] | undefined): { registry: Registry; metrics: FlowMetrics } {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const metrics = FlowMetrics.of(registry);
  registerPartitionGauges(registry, flow, figures);
  return { registry, metrics };
}
