export { Canceled, ChannelClosed, DeadlineExceeded, isContextError } from './errors.ts';
export {
  type CancelFunc,
  type Context,
  type ContextKey,
  afterFunc,
  background,
  createKey,
  errOf,
  sleep,
  withCancel,
  withDeadline,
  withDelayedCancel,
  withSignal,
  withTimeout,
  withValue,
  withoutCancel,
} from './context.ts';
export { TaskGroup, type TaskGroupOptions } from './task-group.ts';
export { Channel, type ReceiveResult } from './channel.ts';
export { formatGoDuration, parseGoDuration } from './duration.ts';
