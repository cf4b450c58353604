// What happened to each planned fault: when it started and healed, and how long recovery took.
import type { FaultType } from './faults';

export interface FaultRecord {
  index: number;
  type: FaultType;
  mode?: string;
  target?: string;
  plannedS: number;
  startedS?: number;
  healedS?: number;
  recoveryS?: number;
  /** No recovery seen: heal → end of sampling (a lower bound). */
  recoveryCensoredS?: number;
  note?: string;
  /** worker-commit-cut: the commit requests cut after (ambiguous commits the worker had to settle). */
  commitsCut?: number;
  error?: string;
  skipped?: boolean;
}

export function formatFault(f: FaultRecord): string {
  const parts = [
    `#${String(f.index).padStart(3)}`,
    f.type.padEnd(20),
    (f.mode ?? '').padEnd(11),
    `planned ${f.plannedS.toFixed(1)} s`,
    f.startedS !== undefined ? `start ${f.startedS.toFixed(1)} s` : '',
    f.healedS !== undefined ? `healed ${f.healedS.toFixed(1)} s` : '',
    f.recoveryS !== undefined ? `recovered +${f.recoveryS} s` : f.skipped ? '' : `NO RECOVERY SEEN${f.recoveryCensoredS !== undefined ? ` (>= ${f.recoveryCensoredS} s)` : ''}`,
    f.target ? `target ${f.target}` : '',
    f.note ?? '',
    f.skipped ? 'SKIPPED' : '',
    f.error ? `ERROR ${f.error}` : '',
  ];
  return parts.filter(Boolean).join('  ');
}
