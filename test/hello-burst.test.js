'use strict';
// A server that sends at once when its 'channel' event fires: the client
// reads the server's last hello message and the first data frames in one
// socket read, while its hello's lowered read limit (1 KiB) is still in
// force. The data must arrive intact and in order, and connect() must
// settle, over named, TCP and TLS channels, on the addon and on the
// pure-JS fallback (the client runs in a child process either way).

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const crypto = require('crypto');
const path = require('path');
const procwire = require('..');
const { cert, key } = require('../bench/lib/test-cert');
const { withTimeout, exitOf, killChild } = require('./helpers/wait');

const CLIENT = path.join(__dirname, 'fixtures', 'hello-burst-client.js');
const COUNT = 100;
const PAYLOAD = 'x'.repeat(16384);
// Generous for a loaded machine; on the old code the client never settles.
const DEADLINE = 30_000;

async function burst(transport, fallback) {
  const secret = crypto.randomBytes(32).toString('hex');
  const unix = transport === 'named';
  const name = `burst-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  const server = unix
    ? procwire.listen(name)
    : procwire.listen({ port: 0, host: '127.0.0.1' }, { secret, tls: transport === 'tls' ? { key, cert } : undefined });
  const channels = [];
  server.on('channel', (channel) => {
    channels.push(channel);
    channel.on('error', () => {});
    for (let i = 0; i < COUNT; i++) channel.send({ i, payload: PAYLOAD });
  });
  await server.ready;
  const env = { ...process.env };
  delete env.PROCWIRE_FORCE_FALLBACK;
  if (!unix) env.PROCWIRE_SECRET = secret;
  if (fallback) env.PROCWIRE_FORCE_FALLBACK = '1';
  const target = unix ? name : String(server.address().port);
  const child = childProcess.spawn(process.execPath, [CLIENT, transport, target, String(COUNT)], {
    stdio: ['ignore', 'pipe', 'inherit'], env,
  });
  const exited = exitOf(child);
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  try {
    await withTimeout(exited, DEADLINE, `the ${transport} client to report`);
    const line = out.split('\n').find((l) => l.startsWith('{'));
    assert.ok(line, `the client reported nothing (stdout: ${JSON.stringify(out)})`);
    return JSON.parse(line);
  } finally {
    for (const channel of channels) channel.destroy();
    server.close();
    await killChild(child, exited);
  }
}

for (const transport of ['named', 'tcp', 'tls']) {
  for (const fallback of [false, true]) {
    test(`${transport}${fallback ? ' (fallback client)' : ''}: data sent right after the hello arrives whole and in order`,
      { timeout: DEADLINE + 10_000 }, async () => {
        const result = await burst(transport, fallback);
        assert.deepStrictEqual(result, { received: COUNT, inOrder: true, ...(fallback ? { fallback: true } : {}) });
      });
  }
}
