import type { Owner } from '../../activities/types';
import type { PartitionState } from './state';

/**
 * What an operator sees of a partition in the Temporal UI besides its search attributes: the
 * current-details panel of its workflow page (Markdown, `setCurrentDetails`; the UI asks a worker
 * for it, so it is there while a worker runs the workflow), and the coarse figures the list shows.
 * Nothing of a record's key or value is shown: the last error is the activity failure's message,
 * already redacted by the owner (core/redact.ts) unless the flow sets `logKeys`.
 */

/**
 * A count as the list shows it: exact below 100, else to two significant digits, so that a steady
 * partition's lag and key count do not change at every report (each change is a history event).
 */
export function coarse(n: number): number {
  if (!Number.isFinite(n) || Math.abs(n) < 100) return n;
  return Number(n.toPrecision(2));
}

const time = (at: number | undefined): string => (at === undefined ? '-' : `${new Date(at).toISOString().slice(11, 19)} UTC`);

/** The owner's process, as the status command shows it: `<host>/<pid>-<id>` of its task queue. */
export const ownerProcess = (o: Owner): string => o.taskQueue.split('/').slice(-2).join('/');

const orDash = (v: string | number | undefined): string => (v === undefined ? '-' : String(v));

/** The current-details panel (Markdown): phase, owner, offsets and lag, keys, last persist, restore, counters, last error. */
export function renderDetails(s: PartitionState): string {
  const { phase, owner, lastPersist: p, lastRecovery: r, counters: c } = s;
  const lines = [`**${phase}**${s.phaseAt === undefined ? '' : ` since ${time(s.phaseAt)}`} — ${s.input.topic} partition ${s.input.partition}`, ''];
  lines.push(
    owner
      ? `- **Owner**: generation ${owner.generation}, member \`${owner.memberId}\`, worker \`${ownerProcess(owner)}\``
      : '- **Owner**: none',
  );
  if (s.ownerGoneAt !== undefined) lines.push(`- **No live owner** since ${time(s.ownerGoneAt)}`);
  lines.push(`- **Offsets**: committed ${orDash(s.committedOffset)} · log end ${orDash(p?.logEndOffset)} · lag ${orDash(p?.lag)}`);
  lines.push(`- **Keys** in memory: ${orDash(p?.liveKeys ?? r?.keys)}`);
  lines.push(
    p
      ? `- **Last persist**: ${time(p.at)}, ${p.persistedKeys} keys written, ${p.deletedKeys} deleted, ${p.ms} ms`
      : '- **Last persist**: none yet',
  );
  lines.push(`- **Restore**: ${restoreText(s)}`);
  lines.push(
    `- **Fences** ${c.fences} · **outputs** ${c.outputs ?? 0} · **dead letters** ${c.deadLetters ?? 0} · **persists** ${c.persists} · **recoveries** ${c.recoveries} · **retries** ${c.retries ?? 0} · **owner losses** ${c.ownerLosses}`,
  );
  if (s.retry) lines.push(`- **Retry**: attempt ${s.retry.attempt}, next at ${time(s.retry.nextAt)}`);
  lines.push(`- **Last error**: ${s.lastError === undefined ? 'none' : `\`${s.lastError.replaceAll('`', "'")}\``}`);
  return lines.join('\n');
}

function restoreText(s: PartitionState): string {
  if (s.phase === 'recovering') {
    const p = s.restoring;
    if (!p) return `in progress since ${time(s.phaseAt)}`;
    const share = p.fraction === undefined ? '' : `${Math.floor(p.fraction * 100)} % — `;
    return `${share}in progress since ${time(s.phaseAt)}: ${p.read} ${p.unit} read (at ${time(p.at)})`;
  }
  const r = s.lastRecovery;
  if (!r) return 'none yet';
  const from = r.fromMemory
    ? 'kept in memory'
    : r.restore
      ? `${r.restore} restore: ${r.fromLocal ?? 0} keys from the local store, ${r.fromTopic ?? 0} snapshot records read`
      : `${r.snapshotsRead} snapshots read`;
  return `100 % — ${r.keys} keys (${from}) in ${r.ms} ms`;
}
