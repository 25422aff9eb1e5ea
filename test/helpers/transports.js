'use strict';
// Opens a channel to a fresh peer process (test/helpers/peer.js) over each
// transport, and closes everything afterwards. PROFILES says what each
// backend declares (handles, out-of-line segments) and how much load its
// cases carry, so test/conformance.test.js gates its cases on them.

const childProcess = require('child_process');
const crypto = require('crypto');
const path = require('path');
const procwire = require('../..');
const { cert, key } = require('../../bench/lib/test-cert');
const { natsServer, stopNatsServer, natsInstalled } = require('./nats-server');
const { withTimeout, exitOf, unlessExited, killChild } = require('./wait');

const PEER = path.join(__dirname, 'peer.js');
// How long a peer process may take to start and connect.
const CONNECT_TIMEOUT = 30_000;

// handles: the channel carries Node handles (unix sockets only).
// scale: share of the full load (1 = a million-message stream, 64 MiB).
// maxSize: largest message the cases send (NATS's max_payload is 1 MiB).
// fdCheck: the case can count this process's descriptors before and after.
// fallback: the peer runs procwire's pure-JS fallback (PROCWIRE_FORCE_FALLBACK).
// highWaterMark: this end's, so a scaled-down stream still meets backpressure.
// nats: the NATS client package both ends use (options.natsClient).
const PROFILES = {
  'fork-plain': { handles: true, scale: 1, maxSize: 64 << 20, fdCheck: false },
  'fork-procwire': { handles: true, scale: 1, maxSize: 64 << 20, fdCheck: false },
  named: { handles: true, scale: 1, maxSize: 64 << 20, fdCheck: true },
  tcp: { handles: false, scale: 1, maxSize: 64 << 20, fdCheck: true },
  tls: { handles: false, scale: 0.1, maxSize: 16 << 20, fdCheck: true, highWaterMark: 64 << 10 },
  // nats: core NATS on the maintained client (@nats-io/transport-node v3);
  // nats-v2: the same on the `nats` v2 package, which keeps working.
  nats: {
    handles: false, scale: 0.02, maxSize: 512 << 10, fdCheck: false, highWaterMark: 16 << 10, nats: '@nats-io/transport-node',
    skip: natsInstalled ? false : 'nats-server is not installed',
  },
  'nats-v2': {
    handles: false, scale: 0.02, maxSize: 512 << 10, fdCheck: false, highWaterMark: 16 << 10, nats: 'nats',
    skip: natsInstalled ? false : 'nats-server is not installed',
  },
  fallback: { handles: true, scale: 0.1, maxSize: 16 << 20, fdCheck: true, fallback: true, highWaterMark: 64 << 10 },
};

const TRANSPORTS = Object.keys(PROFILES);

const waitExit = exitOf;

// The channel of a peer process that connects to `server`. A peer that
// exits first, or does not connect in time, fails open() at once, with the
// server closed and the peer killed: the caller has nothing to clean up.
async function acceptPeer(server, gotChannel, child, exited) {
  try {
    return await withTimeout(unlessExited(gotChannel, exited, 'the peer to connect'), CONNECT_TIMEOUT,
      'the peer to connect');
  } catch (err) {
    server.close();
    await killChild(child, exited);
    throw err;
  }
}

// -> { channel, child, server, cleanup() }
async function open(transport, options = {}) {
  const serialization = options.serialization || 'advanced';
  if (transport === 'fork-plain' || transport === 'fork-procwire') {
    const mode = transport === 'fork-plain' ? 'plain' : 'procwire';
    const child = procwire.fork(PEER, [mode], { serialization, child: mode === 'plain' ? 'node' : 'procwire' });
    // child.channel is null once disconnected (as Node's): keep our own.
    const channel = child.channel;
    return {
      channel,
      child,
      server: null,
      async cleanup() {
        channel.destroy();
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        await waitExit(child);
      },
    };
  }
  if (PROFILES[transport].nats) return openNats(serialization, PROFILES[transport].nats);
  if (serialization !== 'advanced') throw new Error('named/tcp peers use advanced only in these tests');
  const name = `t-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  // Named channels authenticate through the key file beside the socket; TCP
  // needs an explicit secret, handed to the peer in its environment.
  const secret = crypto.randomBytes(32).toString('hex');
  const unix = transport === 'named' || transport === 'fallback';
  const server = unix
    ? procwire.listen(name, { serialization, highWaterMark: PROFILES[transport].highWaterMark })
    : procwire.listen({ port: 0, host: '127.0.0.1' }, {
      serialization, secret, tls: transport === 'tls' ? { key, cert } : undefined,
      highWaterMark: PROFILES[transport].highWaterMark,
    });
  await server.ready;
  const target = unix ? name : String(server.address().port);
  const gotChannel = new Promise((resolve) => server.once('channel', resolve));
  const env = { ...process.env };
  if (!unix) env.PROCWIRE_SECRET = secret;
  if (PROFILES[transport].fallback) env.PROCWIRE_FORCE_FALLBACK = '1';
  const child = childProcess.spawn(process.execPath, [PEER, transport === 'fallback' ? 'named' : transport, target], {
    stdio: ['ignore', 'inherit', 'inherit'], env,
  });
  const exited = exitOf(child);
  const channel = await acceptPeer(server, gotChannel, child, exited);
  return {
    channel,
    child,
    server,
    async cleanup() {
      channel.destroy();
      server.close();
      await killChild(child, exited);
    },
  };
}

// A listener on a nats-server this process started; the peer connects to
// the same subject. A short heartbeat makes a killed peer show within seconds.
async function openNats(serialization, natsClient) {
  const nats = await natsServer();
  const subject = `conformance.${process.pid}.${crypto.randomBytes(4).toString('hex')}`;
  const server = procwire.listen(nats.url, {
    subject, serialization, heartbeat: 1000, highWaterMark: PROFILES.nats.highWaterMark, natsClient,
  });
  await server.ready;
  const gotChannel = new Promise((resolve) => server.once('channel', resolve));
  const child = childProcess.spawn(process.execPath, [PEER, 'nats', nats.url, subject, natsClient], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = exitOf(child);
  const channel = await acceptPeer(server, gotChannel, child, exited);
  return {
    channel,
    child,
    server,
    async cleanup() {
      channel.destroy();
      server.close();
      await killChild(child, exited);
    },
  };
}

module.exports = { TRANSPORTS, PROFILES, open, waitExit, stopNatsServer };
