// Types of the ESM entry (index.mjs): the same declarations as index.d.ts,
// and every name index.mjs exports, but not `cluster`. Reading `cluster`
// loads Node's cluster module, which an import must not do as a side effect,
// so index.mjs leaves it out and ESM code calls getCluster(); declaring it
// here would let `import { cluster } from 'procwire'` type-check and then
// fail at run time.
import * as procwire from './index.js';

export default procwire;
export {
  codec, Framer, Channel, Server, fork, listen, connect, alloc, release, errors, codes, native, getParent, getCluster,
  requireParent, parent, Pool,
} from './index.js';
export type {
  Serialization, ErrorCode, ProcwireError, Codec, FramerOptions, CloseReason,
  SizeBucket, ChannelStats, ChannelOptions, NatsOptions, SendOptions, RequestOptions,
  SendHandle, ProcwireForkOptions, ProcwireChildProcess, Address, AuthOptions, ListenOptions,
  UnixServerAddress, TcpServerAddress, NatsServerAddress, ServerAddress,
  PoolOptions, PoolSettings, RunOptions, PoolHistogram, PoolWorkerInfo, PoolStats, Moved,
  DurableNatsOptions, DurableChannel, DurableStats,
} from './index.js';
