'use strict';
// A hostile procwire peer against the ring wake-up (issue 29): a ring set-up
// whose wake-up descriptor is the peer's own semaphore eventfd, kept
// readable, must not spin the receiver's event loop. Since ring set-up
// version 2 the reader makes its own wake-up link (src/core/wake.h) and never
// polls a descriptor the peer made; a set-up that hands one over closes only
// that channel with ERR_PROCWIRE_RING_CORRUPT.

const test = require('node:test');
const assert = require('node:assert');
const path = require('path');
const { spawn } = require('child_process');
const { once } = require('events');
const procwire = require('..');
const { uniqueName } = require('./helpers/pair');
const { withTimeout, nextMessage, forkRingPeer } = require('./helpers/ring-peer');
const { until } = require('./helpers/wait');

const skip = !procwire.native && 'rings need the native addon';
const PEER = path.join(__dirname, 'fixtures', 'hostile-ring-peer.js');

// Creates the semaphore eventfd (EFD_SEMAPHORE = 1) through libc, fills it
// to 2^64 - 18, and runs node on the hostile peer with it as the last
// argument. Python is there wherever the addon can be built (node-gyp needs
// it); ctypes keeps this independent of os.eventfd (Python 3.10).
const LAUNCHER = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.eventfd(0, 1)
if fd < 0:
    sys.exit('eventfd: errno %d' % ctypes.get_errno())
os.write(fd, (2**64 - 18).to_bytes(8, sys.byteorder))
os.set_inheritable(fd, True)
os.execv(sys.argv[1], sys.argv[1:] + [str(fd)])
`;

const WINDOW_MS = 3000;

for (const version of [1, 2]) {
  test(`a peer's semaphore eventfd in a version ${version} ring set-up does not spin the receiver`, { timeout: 120_000, skip }, async (t) => {
    // The victim: this process, serving a named channel without the hello,
    // and talking to another procwire peer on a ring channel meanwhile.
    const other = await forkRingPeer(t);
    const name = uniqueName('hostile-ring');
    const server = procwire.listen(name, { auth: false });
    t.after(() => server.close());
    await server.ready;
    let victim = null;
    let victimError = null;
    let victimClosed = false;
    server.on('channel', (channel) => {
      victim = channel;
      channel.on('message', () => {});
      channel.on('error', (err) => { victimError = err; });
      channel.on('close', () => { victimClosed = true; });
    });

    const peer = spawn('python3', ['-c', LAUNCHER, process.execPath, PEER, name, String(version)],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    t.after(async () => {
      if (peer.exitCode === null && peer.signalCode === null) {
        peer.kill('SIGKILL');
        await once(peer, 'exit');
      }
    });
    let out = '';
    peer.stdout.setEncoding('utf8');
    peer.stdout.on('data', (s) => { out += s; });
    await until(() => out.includes('sent') || peer.exitCode !== null, 60_000, 'the hostile peer to send its set-up');
    assert.ok(out.includes('sent'), `the hostile peer exited with ${peer.exitCode}`);
    await until(() => victim !== null, 10_000, 'the victim end to be accepted');

    // Three seconds of the victim's own CPU time, with a round trip on its
    // other channel every 100 ms. An honest exchange at this rate costs a few
    // milliseconds; a spinning wake-up costs a whole CPU.
    const cpuBefore = process.cpuUsage();
    const start = Date.now();
    const rtts = [];
    let seq = 0;
    while (Date.now() - start < WINDOW_MS) {
      const sent = Date.now();
      other.channel.send({ op: 'rtt', seq });
      await withTimeout(nextMessage(other.channel, (m) => m && m.op === 'rtt' && m.seq === seq), 10_000, 'a round trip on the other channel');
      rtts.push(Date.now() - sent);
      seq++;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const cpu = process.cpuUsage(cpuBefore);
    const elapsed = Date.now() - start;
    const cpuMs = (cpu.user + cpu.system) / 1000;
    t.diagnostic(`victim CPU ${cpuMs.toFixed(1)} ms over ${elapsed} ms; round trips max ${Math.max(...rtts)} ms, n ${rtts.length}`);
    assert.ok(cpuMs < 0.05 * elapsed, `the victim used ${cpuMs.toFixed(1)} ms of CPU in ${elapsed} ms`);
    assert.ok(Math.max(...rtts) < 1000, `a round trip on the other channel took ${Math.max(...rtts)} ms`);

    // The forged set-up closed only that channel, with the ring's error.
    await until(() => victimClosed, 10_000, 'the hostile channel to close');
    assert.ok(victimError !== null, 'the hostile channel closed with an error');
    assert.strictEqual(victimError.code, 'ERR_PROCWIRE_RING_CORRUPT', victimError.message);
    other.channel.send({ op: 'after', seq: -1 });
    await withTimeout(nextMessage(other.channel, (m) => m && m.op === 'after'), 10_000, 'the other channel afterwards');
  });
}
