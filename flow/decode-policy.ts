import type { TopicPartition } from '../persistence/types';
import type { DecodeError } from './codec/errors';
import type { InputMessage } from './record';

/**
 * What to do with a record whose value the codec cannot decode: stop the partition (`fail`, the
 * default), count it and move on (`skip`), or hand it to a dead-letter sink and move on.
 */
export type DecodeFailurePolicy = 'fail' | 'skip' | 'dead-letter';

/**
 * Receives undecodable records under the `dead-letter` policy. A returned Promise is awaited before
 * the batch completes, so the record's offset is never committed before the sink has it.
 */
export type DeadLetterSink = (message: InputMessage, error: DecodeError, partition: TopicPartition) => void | Promise<void>;
