// Wrong ESM usages (compiled by test/types.test.js): each must be a type error.
// @ts-expect-error index.mjs does not export `cluster` (reading it loads Node's cluster module): use getCluster().
import { cluster } from 'procwire';
import { fork, connect } from 'procwire';

// @ts-expect-error a typed channel refuses a message of the wrong shape.
fork<{ ok: boolean }, { n: number }>('./w.js').channel?.send({ n: 'one' });
// @ts-expect-error a typed channel's responder takes what the channel receives.
(await connect<{ n: number }, string>('jobs')).respond((v: string) => v);
void cluster;
