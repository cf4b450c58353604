import { Counter, type Registry } from 'prom-client';

/**
 * kafka-flow's compressor metrics, `compressor_raw_bytes` and `compressor_compressed_bytes` by
 * `component`, created once per registry: the engine's metrics (flow/metrics.ts) register them and
 * every backend's snapshot compressor counts into them, on whichever registry the process exposes.
 */
export interface CompressorCounters {
  /** Bytes of state before compression (kafka-flow's name), by compressor `component`. */
  readonly raw: Counter<'component'>;
  /** Bytes after compression, header included (kafka-flow's name), by compressor `component`. */
  readonly compressed: Counter<'component'>;
}

const byRegistry = new WeakMap<Registry, CompressorCounters>();

/** The compressor counters registered on `registry` (created on first use). */
export function compressorCounters(registry: Registry): CompressorCounters {
  let counters = byRegistry.get(registry);
  if (!counters) {
    counters = {
      raw: new Counter({ name: 'compressor_raw_bytes', help: 'Size of state before compression', labelNames: ['component'], registers: [registry] }),
      compressed: new Counter({
        name: 'compressor_compressed_bytes',
        help: 'Size of compressed state, including the compression header',
        labelNames: ['component'],
        registers: [registry],
      }),
    };
    byRegistry.set(registry, counters);
  }
  return counters;
}

/** What a backend takes to count into the process's metrics: its registry (the engine's FlowMetrics fits). */
export interface MetricsRegistry {
  readonly registry: Registry;
}
