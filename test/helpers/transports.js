'use strict';
// Opens a channel to a fresh peer process (test/helpers/peer.js) over each
// transport, and closes everything afterwards.

const childProcess = require('child_process');
const crypto = require('crypto');
const path = require('path');
const fs = require('fs');
const procwire = require('../..');

const PEER = path.join(__dirname, 'peer.js');

const TRANSPORTS = ['fork-plain', 'fork-procwire', 'named', 'tcp'];

function waitExit(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', resolve));
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
  const name = `t-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  // Named channels authenticate through the key file beside the socket; TCP
  // needs an explicit secret, handed to the peer in its environment.
  const secret = crypto.randomBytes(32).toString('hex');
  const server = transport === 'named'
    ? procwire.listen(name, { serialization })
    : procwire.listen({ port: 0, host: '127.0.0.1' }, { serialization, secret });
  await server.ready;
  const target = transport === 'named' ? name : String(server.address().port);
  const gotChannel = new Promise((resolve) => server.once('channel', resolve));
  const child = childProcess.spawn(process.execPath, [PEER, transport, target], {
    stdio: 'inherit', env: transport === 'tcp' ? { ...process.env, PROCWIRE_SECRET: secret } : process.env,
  });
  const channel = await gotChannel;
  if (serialization !== 'advanced') throw new Error('named/tcp peers use advanced only in these tests');
  return {
    channel,
    child,
    server,
    async cleanup() {
      channel.destroy();
      server.close();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await waitExit(child);
    },
  };
}

function openFds() {
  return fs.readdirSync('/proc/self/fd').length;
}

module.exports = { TRANSPORTS, open, openFds, waitExit };
