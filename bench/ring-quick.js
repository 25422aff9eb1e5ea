'use strict';
// A quick look at one transport, outside the bench suite: 64-byte messages
// ({ payload: '.'.repeat(64) }) between this process and a forked echo
// child, first 256 in flight (round trips/s over a window after 200 ms of
// warm-up), then one at a time (p50 and p99 of the round-trip time, the
// first fifth dropped as warm-up). Run it several times, interleaved, and
// take medians: one run on a shared machine says little.
//
//   node bench/ring-quick.js <rings|socket|node-json|node-advanced> [windowMs]
//
// rings / socket: procwire on both sides, advanced, rings 'auto' / 'never';
// PROCWIRE_ADDON picks the addon (to compare builds).

const path = require('path');
const childProcess = require('child_process');

const mode = process.argv[2];
const windowMs = Number(process.argv[3] || 1000);
const echo = path.join(__dirname, 'peers', 'ipc-echo.js');
const MODES = ['rings', 'socket', 'node-json', 'node-advanced'];
if (!MODES.includes(mode)) {
  console.error(`usage: node bench/ring-quick.js <${MODES.join('|')}> [windowMs]`);
  process.exit(2);
}

const child = mode === 'rings' || mode === 'socket'
  ? require('..').fork(echo, ['echo'], { serialization: 'advanced', rings: mode === 'rings' ? 'auto' : 'never' })
  : childProcess.fork(echo, ['echo'], { serialization: mode === 'node-json' ? 'json' : 'advanced' });
const msg = { payload: '.'.repeat(64) };
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

function pipelined() {
  return new Promise((resolve) => {
    let inflight = 0;
    let count = 0;
    let counting = false;
    let stopping = false;
    let rate = 0;
    const onMessage = () => {
      inflight--;
      if (counting) count++;
      if (!stopping) {
        inflight++;
        child.send(msg);
      } else if (inflight === 0) {
        child.off('message', onMessage);
        resolve(rate);
      }
    };
    child.on('message', onMessage);
    for (let i = 0; i < 256; i++) {
      inflight++;
      child.send(msg);
    }
    setTimeout(() => {
      counting = true;
      const t0 = nowMs();
      setTimeout(() => {
        rate = count / ((nowMs() - t0) / 1000);
        counting = false;
        stopping = true;
      }, windowMs);
    }, 200);
  });
}

function sequential() {
  return new Promise((resolve) => {
    const lats = [];
    const end = nowMs() + windowMs + 200;
    let t = 0;
    const onMessage = () => {
      const n = nowMs();
      lats.push(n - t);
      if (n > end) {
        child.off('message', onMessage);
        resolve(lats);
        return;
      }
      t = nowMs();
      child.send(msg);
    };
    child.on('message', onMessage);
    t = nowMs();
    child.send(msg);
  });
}

child.once('message', async () => {
  const rate = await pipelined();
  const lats = await sequential();
  const kept = lats.slice(Math.floor(lats.length / 5)).sort((a, b) => a - b);
  const us = (q) => (kept[Math.floor(q * (kept.length - 1))] * 1000).toFixed(1);
  console.log(`${mode}: pipelined ${Math.round(rate)}/s; sequential p50 ${us(0.5)} us p99 ${us(0.99)} us (n=${kept.length})`);
  child.disconnect();
});
