'use strict';
// A channel paused with pause() whose peer (a real child process) hangs up:
// with nothing left to read, the hang-up ends the channel at once, as it
// would a reading one (it used to stay open, unnoticed, until resumed);
// with messages left, they come first, on resume, and then the close (a
// named channel used to close at once when the peer exited with our
// messages unread, dropping its own).

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const crypto = require('crypto');
const path = require('path');
const { once } = require('events');
const procwire = require('..');
const { withTimeout, exitOf, killChild } = require('./helpers/wait');

const ROOT = path.join(__dirname, '..');
const DEADLINE = 20_000;

// A child that connects, sends `count` messages, waits until they left and
// exits.
function peer(target, count) {
  const script = `
    const procwire = require(${JSON.stringify(ROOT)});
    procwire.connect(${JSON.stringify(target)}, { auth: false }).then((ch) => {
      if (${count} === 0) return process.exit(0);
      for (let i = 0; i < ${count}; i++) ch.send({ i }, i === ${count} - 1 ? () => process.exit(0) : undefined);
    });`;
  const child = childProcess.spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'inherit', 'inherit'] });
  return { child, exited: exitOf(child) };
}

async function pausedChannel(transport, count) {
  const tcp = transport === 'tcp';
  const server = tcp
    ? procwire.listen({ port: 0, host: '127.0.0.1' }, { auth: false })
    : procwire.listen(`pause-${process.pid}-${crypto.randomBytes(4).toString('hex')}`, { auth: false });
  await server.ready;
  const gotChannel = new Promise((resolve) => server.once('channel', (ch) => resolve(ch.pause())));
  const target = tcp ? { port: server.address().port, host: '127.0.0.1' } : server.address();
  const p = peer(target, count);
  const channel = await withTimeout(gotChannel, DEADLINE, 'the peer to connect');
  return { channel, server, ...p };
}

// TCP: a peer that sent nothing left nothing unread. (A named channel's
// peer sends its capability notice on connect, which waits for resume.)
test('tcp: a paused channel whose peer hangs up with nothing unread closes', { timeout: DEADLINE * 2 }, async () => {
  const { channel, server, child, exited } = await pausedChannel('tcp', 0);
  try {
    const [reason] = await withTimeout(once(channel, 'close'), DEADLINE, 'the paused channel to close');
    assert.strictEqual(reason, 'peer-closed');
  } finally {
    channel.destroy();
    server.close();
    await killChild(child, exited);
  }
});

for (const transport of ['named', 'tcp']) {
  test(`${transport}: a paused channel whose peer hangs up closes on resume`, { timeout: DEADLINE * 2 }, async () => {
    const { channel, server, child, exited } = await pausedChannel(transport, 0);
    try {
      await withTimeout(exited, DEADLINE, 'the peer to exit');
      const closed = channel.closed ? Promise.resolve(['already']) : once(channel, 'close');
      channel.resume();
      const [reason] = await withTimeout(closed, DEADLINE, 'the channel to close after resume');
      // The peer exited with our capability notice unread: a reset.
      assert.ok(['peer-closed', 'peer-reset', 'already'].includes(reason), `closed with ${reason}`);
    } finally {
      channel.destroy();
      server.close();
      await killChild(child, exited);
    }
  });

  test(`${transport}: a paused channel delivers what the peer sent before hanging up, then closes`,
    { timeout: DEADLINE * 2 }, async () => {
      const { channel, server, child, exited } = await pausedChannel(transport, 3);
      // Said in the failure below: why the channel closed, if it did.
      let earlyReason = 'none';
      channel.once('close', (reason) => { earlyReason = reason; });
      try {
        await withTimeout(exited, DEADLINE, 'the peer to exit');
        const got = [];
        channel.on('message', (m) => got.push(m.i));
        assert.strictEqual(channel.closed, false, `closed while paused with messages unread (${earlyReason})`);
        const closed = once(channel, 'close');
        channel.resume();
        const [reason] = await withTimeout(closed, DEADLINE, 'the channel to close after resume');
        assert.deepStrictEqual(got, [0, 1, 2]);
        // A named peer that exited with our capability notice unread: a reset.
        assert.ok(['peer-closed', 'peer-reset'].includes(reason), `closed with ${reason}`);
      } finally {
        channel.destroy();
        server.close();
        await killChild(child, exited);
      }
    });
}
