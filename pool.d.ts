// Types of procwire/pool: the Pool of index.d.ts and its move().
import { Pool, Moved } from './index';

export { Pool, PoolOptions, PoolSettings, RunOptions, PoolStats, PoolHistogram, PoolWorkerInfo, Moved } from './index';
export declare function move<T>(value: T, transfer?: (ArrayBuffer | ArrayBufferView)[]): Moved<T>;
