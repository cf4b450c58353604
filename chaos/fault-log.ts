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
  /** Heal → every partition of the affected modes progressed, leaving out outages meanwhile (chaos/outages.ts recoveryFigures). */
  recoveryS?: number;
  /** The same, wall clock (outages meanwhile counted too). */
  recoveryWallS?: number;
  /** No recovery seen: heal → end of sampling (a lower bound), outages left out. */
  recoveryCensoredS?: number;
  /** The same, wall clock. */
  recoveryCensoredWallS?: number;
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
    f.recoveryS !== undefined ? `recovered +${f.recoveryS} s${f.recoveryWallS !== undefined && f.recoveryWallS !== f.recoveryS ? ` (${f.recoveryWallS} s wall)` : ''}` : f.skipped ? '' : `NO RECOVERY SEEN${f.recoveryCensoredS !== undefined ? ` (>= ${f.recoveryCensoredS} s)` : ''}`,
    f.target ? `target ${f.target}` : '',
    f.note ?? '',
    f.skipped ? 'SKIPPED' : '',
    f.error ? `ERROR ${f.error}` : '',
  ];
  return parts.filter(Boolean).join('  ');
}
