'use strict';
// The NATS fault run (test/helpers/nats-fault-run.js), run once from its own
// section of scripts/test.sh, not per Node line: 2 caller processes send
// FAULT_REQUESTS (default 100,000) requests to 4 worker processes over a
// 3-server JetStream cluster, and once a third are answered two workers and
// one nats-server are killed with SIGKILL.
//
// Durable channels: every request gets exactly one reply, none is lost, none
// is wrong; the run prints the redeliveries and duplicates suppressed. The
// same run on core NATS channels prints what is lost there (docs/fleet.md
// quotes both).

const { describe, it } = require('node:test');
const assert = require('node:assert');
const { faultRun } = require('../helpers/nats-fault-run');
const { natsServerInstalled } = require('../helpers/nats-cluster');

const REQUESTS = Number(process.env.FAULT_REQUESTS || 100_000);
const skip = natsServerInstalled ? false : 'nats-server is not installed (scripts/setup.sh installs it)';
const log = (s) => process.stdout.write(`${s}\n`);

function print(r) {
  log(`# ${r.mode}: ${r.requests} requests in ${r.ms} ms (${r.reqPerSec}/s), killed after ${r.killedAt} replies: ` +
    `${r.replies} replied, ${r.lost} lost ${JSON.stringify(r.errors)}, ${r.wrong} wrong; ` +
    `redeliveries ${r.redeliveries}, duplicates suppressed ${r.duplicatesSuppressed} ` +
    `(by the stream ${r.duplicatesAtStream}, by the callers ${r.duplicatesAtCaller}), late replies ${r.lateReplies}, ` +
    `publishes retried ${r.republished}`);
}

describe('NATS fault run: 2 callers, 4 workers, 3 servers; two workers and a server killed', { skip }, () => {
  it(`durable: ${REQUESTS} requests, every one answered exactly once`, { timeout: 360_000 }, async () => {
    const r = await faultRun({ mode: 'durable', requests: REQUESTS, deadlineMs: 300_000, log });
    print(r);
    assert.strictEqual(r.lost, 0, `lost: ${JSON.stringify(r.errors)}`);
    assert.strictEqual(r.wrong, 0);
    assert.strictEqual(r.replies, r.requests);
    // The kills hit work in progress: it was redelivered.
    assert.ok(r.redeliveries > 0, 'no request was redelivered: the kill missed the run');
  });

  it(`core NATS: the same run, what is lost`, { timeout: 300_000 }, async () => {
    const r = await faultRun({ mode: 'core', requests: REQUESTS, deadlineMs: 240_000, log });
    print(r);
    assert.strictEqual(r.wrong, 0);
    assert.strictEqual(r.replies + r.lost, r.requests);
  });
});
