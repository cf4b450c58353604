import type { Logger } from '../../core/logger';
import type { RestoreProgress } from '../../flow/ports';

/** Default time between a recovery's progress reports to its partition workflow (KFT_RESTORE_REPORT_EVERY_MS). */
export const RESTORE_REPORT_EVERY_MS = 10_000;

/**
 * While a recovery runs, sends how far it is every `everyMs` — the first after `everyMs`, so a
 * recovery shorter than that sends nothing — skipping a report equal to the last one sent, and one
 * while the previous is still being sent. Each report is a signal, a history event of the partition's
 * workflow: a 2-minute recovery costs 12 at the default. A report that fails to send is dropped (the
 * next one says more). Returns the stop.
 */
export function reportRestore(
  read: () => RestoreProgress | undefined,
  send: (progress: RestoreProgress) => Promise<void>,
  everyMs: number,
  log: Logger,
): () => void {
  let last: string | undefined;
  let sending = false;
  const timer = setInterval(() => {
    const p = read();
    if (!p || sending) return;
    const seen = `${p.read}/${p.fraction}`;
    if (seen === last) return;
    last = seen;
    sending = true;
    send(p)
      .catch((err) => log.debug({ err }, 'a restore progress report was not sent'))
      .finally(() => {
        sending = false;
      });
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
