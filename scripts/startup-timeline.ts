// The start-up timeline of one bench:throughput run of ours, from the worker's log
// (BENCH_WORKER_LOG: every line prefixed with ms since spawn) and the partition workflows'
// histories (the bench terminates them, so they are still there): ms since spawn of the worker's
// own phases (its `worker started` line's `startup` marks), each partition's workflow start
// (signalWithStart), first workflow task, recover and fold-loop activities (scheduled / started),
// its fence and recovery lines, and the first record folded.
//
//   BENCH_ONLY=ours BENCH_RUNS=1 BENCH_WORKER_LOG=/tmp/w.log npm run bench:throughput -- --quick
//   node bin/run-ts.js scripts/startup-timeline.ts /tmp/w.log
import fs from 'node:fs';
import { connectTemporalClient } from '../workers/connect/temporal-client';
import { partitionWorkflowId } from '../workflows/partition-workflow';

interface LogLine {
  rel: number;
  text: string;
  json?: Record<string, unknown>;
}

function readLog(file: string): LogLine[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => {
      const space = l.indexOf(' ');
      const text = l.slice(space + 1);
      let json: Record<string, unknown> | undefined;
      if (text.startsWith('{')) {
        try {
          json = JSON.parse(text);
        } catch {
          // not JSON
        }
      }
      return { rel: Number(l.slice(0, space)), text, json };
    });
}

async function main(): Promise<void> {
  const file = process.argv[2];
  if (!file) throw new Error('usage: node bin/run-ts.js scripts/startup-timeline.ts <worker log>');
  // The log of the last run in the file (BENCH_WORKER_LOG appends).
  const all = readLog(file);
  const lastFlow = [...all].reverse().find((l) => typeof l.json?.flow === 'string')?.json?.flow as string;
  const lines = all.filter((l) => l.json === undefined ? true : l.json.flow === lastFlow);
  // Spawn, in epoch ms: a line's epoch time minus its ms since spawn (it reached the bench that much
  // later than it was logged, so the smallest difference is the closest).
  const spawnAt = Math.min(...lines.filter((l) => typeof l.json?.time === 'number').map((l) => (l.json!.time as number) - l.rel));
  const since = (epochMs: number) => Math.round(epochMs - spawnAt);
  const rows: Array<[number, string]> = [];
  let topic: string | undefined;
  let partitions: number[] = [];
  for (const l of lines) {
    const j = l.json;
    if (!j) {
      if (l.text === 'BENCH FIRST_FOLD' || l.text === 'BENCH ALL_FOLDED') rows.push([l.rel, l.text]);
      continue;
    }
    const at = since(j.time as number);
    const msg = j.msg as string;
    if (msg === 'worker started' && j.startup) {
      for (const [k, v] of Object.entries(j.startup as Record<string, number>)) rows.push([v - 0, `worker: ${k} (process clock)`]);
    }
    if (msg === 'partitions assigned') {
      const a = j.assignment as Record<string, number[]>;
      topic = Object.keys(a)[0];
      partitions = topic ? a[topic]! : [];
    }
    if (['worker started', 'partitions assigned', 'snapshot topic ready', 'workflow bundle from the cache'].includes(msg)) rows.push([at, msg]);
    else if (msg === 'snapshot producer initialized (fence)') rows.push([at, `p${j.partition} fenced (${j.ms} ms)`]);
    else if (msg === 'recovered') rows.push([at, `p${j.partition} recovered ${JSON.stringify(j.phases)} ${j.ms} ms`]);
  }
  if (topic) {
    const temporal = await connectTemporalClient();
    try {
      for (const partition of partitions) {
        const handle = temporal.client.workflow.getHandle(partitionWorkflowId({ flow: lastFlow, topic, partition }));
        const history = await handle.fetchHistory();
        const names = new Map<string, string>();
        let wft = 0;
        for (const e of history.events ?? []) {
          const t = e.eventTime ? Number(e.eventTime.seconds) * 1000 + Math.round((e.eventTime.nanos ?? 0) / 1e6) : 0;
          const type = String(e.eventType);
          const id = String(e.eventId);
          if (e.workflowExecutionStartedEventAttributes) rows.push([since(t), `p${partition} workflow started`]);
          else if (e.workflowTaskStartedEventAttributes && wft < 2) rows.push([since(t), `p${partition} workflow task ${++wft} started`]);
          else if (e.workflowTaskCompletedEventAttributes && wft <= 2) rows.push([since(t), `p${partition} workflow task ${wft} completed`]);
          else if (e.activityTaskScheduledEventAttributes) {
            const name = e.activityTaskScheduledEventAttributes.activityType?.name ?? '?';
            names.set(id, name);
            if (name === 'recover' || name === 'foldLoop') rows.push([since(t), `p${partition} ${name} scheduled`]);
          } else if (e.activityTaskStartedEventAttributes) {
            const name = names.get(String(e.activityTaskStartedEventAttributes.scheduledEventId)) ?? '?';
            if (name === 'recover' || name === 'foldLoop') rows.push([since(t), `p${partition} ${name} started (attempt ${e.activityTaskStartedEventAttributes.attempt})`]);
          } else if (e.activityTaskCompletedEventAttributes) {
            const name = names.get(String(e.activityTaskCompletedEventAttributes.scheduledEventId)) ?? '?';
            if (name === 'recover') rows.push([since(t), `p${partition} ${name} completed`]);
          }
          void type;
        }
      }
    } finally {
      await temporal.connection.close();
    }
  }
  rows.sort((a, b) => a[0] - b[0]);
  for (const [at, what] of rows) process.stdout.write(`${String(at).padStart(6)}  ${what}\n`);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : err}\n`);
  process.exit(1);
});
