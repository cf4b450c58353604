import type { PoisonPolicy } from './poison';

/**
 * What to do with a record whose value the codec cannot decode: stop the partition (`fail`, the
 * default), count it and move on (`skip`), or dead-letter it and move on. See PoisonPolicy.
 */
export type DecodeFailurePolicy = PoisonPolicy;
