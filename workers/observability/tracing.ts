/**
 * The OpenTelemetry SDK of a worker whose OTEL_* variables ask for traces (config/tracing.ts):
 * a tracer provider exporting over OTLP/HTTP (protobuf or JSON) in batches, registered globally
 * (the AsyncLocalStorage context, so a span opened inside an activity is its child; W3C trace
 * context, which Temporal's interceptors carry from a workflow to its activities), our own spans
 * (core/tracing.ts) and what the Temporal workers need: the workflow interceptors' module for the
 * bundle, the sink workflow spans leave the sandbox through, the activity interceptors.
 *
 * Only `workers/worker.ts` loads this module, and only when tracing is on: off, no module of the
 * SDK, the exporters or the Temporal interceptors is loaded.
 */
import * as otel from '@opentelemetry/api';
import { envDetectorSync, hostDetectorSync, Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace-node';
import {
  makeWorkflowExporter,
  type OpenTelemetrySinks,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import type { InjectedSinks, WorkerOptions } from '@temporalio/worker';
import type { TracingConfig } from '../../config/tracing';
import type { Logger } from '../../core/logger';
import { errorAttributes, type OpenSpan, type SpanFields, type SpanName, type SpanTracer, setTracer, spanAttributes } from '../../core/tracing';

export const TRACER_NAME = 'kafka-flow-temporal';

/** What a worker wires when tracing is on. */
export interface WorkerTracing {
  /** The modules the workflow bundle must include (Temporal's workflow interceptors). */
  readonly workflowInterceptorModules: string[];
  /** The workflow worker's sinks: where the workflow spans leave the sandbox. */
  readonly workflowSinks: InjectedSinks<OpenTelemetrySinks>;
  /** The activity worker's interceptors (a span per activity run, the workflow's span its parent). */
  readonly activityInterceptors: NonNullable<NonNullable<WorkerOptions['interceptors']>['activity']>;
  /** Exports what is buffered and stops the SDK (a worker's stop; never throws). */
  shutdown(): Promise<void>;
}

/** Starts the SDK for `config`; `attributes` go on the resource (every span of this process). */
export function startTracing(config: TracingConfig, attributes: Record<string, string | number>, log: Logger): WorkerTracing {
  // Export failures (a collector down, refused) are the SDK's diag messages: into our log, at warn.
  otel.diag.setLogger(
    {
      error: (message) => log.warn({ otel: message }, 'OpenTelemetry'),
      warn: (message) => log.warn({ otel: message }, 'OpenTelemetry'),
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    { logLevel: otel.DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const resource = Resource.default()
    .merge(hostDetectorSync.detect())
    .merge(new Resource({ 'service.name': config.serviceName, 'process.pid': process.pid, ...attributes }))
    // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, as the operator set them, last.
    .merge(envDetectorSync.detect());
  const processor = new BatchSpanProcessor(exporterFor(config));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  provider.register();
  const tracer = provider.getTracer(TRACER_NAME);
  setTracer(spanTracer(tracer));
  log.info({ url: config.url, protocol: config.protocol, serviceName: config.serviceName }, 'tracing: OpenTelemetry spans exported over OTLP');

  let stopped: Promise<void> | undefined;
  return {
    workflowInterceptorModules: [require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')],
    workflowSinks: { exporter: makeWorkflowExporter(processor, resource) },
    activityInterceptors: [
      (ctx) => ({
        inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer }),
        outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
      }),
    ],
    shutdown: () => {
      stopped ??= (async () => {
        setTracer(undefined);
        try {
          await provider.shutdown();
        } catch (err) {
          log.warn({ err }, 'tracing: the last spans could not be exported');
        }
        // Unregistered, so a later worker in the same process (tests) registers its own.
        otel.trace.disable();
        otel.context.disable();
        otel.propagation.disable();
        otel.diag.disable();
      })();
      return stopped;
    },
  };
}

function exporterFor(config: TracingConfig): SpanExporter {
  // The exporters read OTEL_EXPORTER_OTLP_(TRACES_)HEADERS and _TIMEOUT themselves; the URL is
  // ours (config/tracing.ts validated it and appended /v1/traces where the spec says to).
  if (config.protocol === 'http/json') {
    const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http') as typeof import('@opentelemetry/exporter-trace-otlp-http');
    return new OTLPTraceExporter({ url: config.url });
  }
  const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto') as typeof import('@opentelemetry/exporter-trace-otlp-proto');
  return new OTLPTraceExporter({ url: config.url });
}

/** Our spans (core/tracing.ts) on `tracer`: active while `fn` runs, the error recorded by class and code only. */
export function spanTracer(tracer: otel.Tracer): SpanTracer {
  return {
    span<T>(name: SpanName, fields: SpanFields, fn: (span: OpenSpan) => Promise<T>): Promise<T> {
      return tracer.startActiveSpan(name, { attributes: spanAttributes(fields) }, async (span) => {
        let failed = false;
        const fail = (err: unknown) => {
          failed = true;
          const { type, code } = errorAttributes(err);
          span.setAttributes({ 'error.type': type, ...(code ? { 'kafka_flow.error_code': code } : {}) });
          span.setStatus({ code: otel.SpanStatusCode.ERROR, message: code ? `${type} (${code})` : type });
        };
        try {
          const result = await fn({ set: (more) => span.setAttributes(spanAttributes(more)), fail });
          if (!failed) span.setStatus({ code: otel.SpanStatusCode.OK });
          return result;
        } catch (err) {
          fail(err);
          throw err;
        } finally {
          span.end();
        }
      });
    },
  };
}
