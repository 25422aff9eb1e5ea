'use strict';
// Shared memory over cycles of killing children in the middle of large
// transfers (issue 29): what the parent holds is the segments of Buffers it
// received (mapped until garbage-collected) and its pools while a channel
// lives; once the channels are closed and those Buffers collected, no
// segment is mapped or open in the parent, so nothing accumulates over the
// cycles. Real child processes, real segments.

const test = require('node:test');
const fs = require('fs');
const path = require('path');
const v8 = require('v8');
const vm = require('vm');
const procwire = require('..');
const { until, withTimeout } = require('./helpers/wait');

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

const CYCLES = 6;

// The memfd segments this process has open and mapped, in bytes.
function segments() {
  let open = 0;
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    let target;
    try {
      target = fs.readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue;
    }
    if (target.startsWith('/memfd:')) open++;
  }
  let mapped = 0;
  for (const line of fs.readFileSync('/proc/self/maps', 'utf8').split('\n')) {
    if (!line.includes('/memfd:')) continue;
    const [from, to] = line.split(' ')[0].split('-').map((x) => parseInt(x, 16));
    mapped += to - from;
  }
  return { open, mapped };
}

test(`no shared memory is left in the parent after ${CYCLES} children killed mid-transfer`, { timeout: 120000, skip: !procwire.native && 'segments need the native addon' }, async () => {
  const big = Buffer.alloc(4 * 1024 * 1024, 2);
  for (let cycle = 0; cycle < CYCLES; cycle++) {
    const child = procwire.fork(path.join(__dirname, 'fixtures', 'segment-pump.js'), { serialization: 'advanced' });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    let received = 0;
    child.on('message', () => { received++; });
    child.on('error', () => {});
    const sender = setInterval(() => {
      if (child.connected && child.channel.writableLength < 16 * 1024 * 1024) child.send(big);
    }, 2);
    try {
      await until(() => received >= 8, 30000, 'large messages from the child');
    } finally {
      child.kill('SIGKILL');
      clearInterval(sender);
    }
    await withTimeout(exited, 20000, 'the killed child');
    await until(() => child.channel === null, 20000, 'the channel to close');
  }
  // The received Buffers are garbage now; their segments go with them.
  await until(() => {
    gc();
    const now = segments();
    return now.open === 0 && now.mapped === 0;
  }, 20000, 'every segment unmapped and closed', 100);
});
