// procwire/register: loaded for its effect (child_process.fork becomes
// procwire's fork in this process; see docs/adoption.md).

/** Whether this load installed the hook (false when PROCWIRE_REGISTER=0 or it was already installed). */
export declare const registered: boolean;

declare module 'child_process' {
  interface ForkOptions {
    /** false: this call uses Node's own fork even with procwire/register loaded. */
    procwire?: boolean;
  }
}
