import { InvalidArgumentError } from 'commander';

/** A command-line option given in seconds: a number > 0. */
export const positiveSeconds = (v: string): number => {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('a number of seconds > 0');
  return n;
};
