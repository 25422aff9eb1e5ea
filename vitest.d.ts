// procwire/vitest: a pool for Vitest 4's custom pool API (see docs/adoption.md).
// Typed structurally, so procwire needs no Vitest types installed.

/** What Vitest's `test.pool` option takes for a custom pool. */
export interface ProcwirePool {
  readonly name: string;
  createPoolWorker: (options: any) => any;
}

/** `pool: procwire()`: Vitest's forks worker, forked through procwire. */
export declare function procwire(options?: {
  /** The pool's name (default 'procwire'). */
  name?: string;
  /** fork()'s child mode: 'node' (default: a plain worker, the parent's end native) or 'native' (both ends). */
  child?: 'node' | 'native';
  /**
   * Whether to fork the next worker while the current test file runs (default true): with
   * `isolate`, a warm spare per slot, forked with the same execArgv and env, so a file does not
   * wait for a process start. `false` forks each worker when Vitest starts it, as the forks pool.
   */
  spare?: boolean;
}): ProcwirePool;
export default procwire;
