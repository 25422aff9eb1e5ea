'use strict';
// Forking test/fixtures/ring-peer.js, the procwire child that echoes and acts
// on { op } messages, for the tests of rings and of the write path.

const path = require('path');
const { once } = require('events');
const procwire = require('../..');
const { nextMessage } = require('./messages');
const { withTimeout } = require('./wait');

const PEER = path.join(__dirname, '..', 'fixtures', 'ring-peer.js');

// Forks the peer as a procwire child (advanced unless `options` say
// otherwise), kills it when test `t` ends, and returns once one round trip
// went through: both ends' set-up frames (rings included) have been read by
// then.
async function forkRingPeer(t, options = {}) {
  const child = procwire.fork(PEER, [], { child: 'procwire', serialization: 'advanced', ...options });
  const channel = child.channel;
  t.after(async () => {
    channel.destroy();
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
  });
  channel.send({ op: 'ping' });
  await withTimeout(nextMessage(channel, (m) => m && m.op === 'ping'), 20_000, 'the first echo');
  return { child, channel };
}

// nextMessage and withTimeout are passed on for the suites that fork this peer.
module.exports = { PEER, withTimeout, nextMessage, forkRingPeer };
