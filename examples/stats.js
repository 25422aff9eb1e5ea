'use strict';
// What a channel can tell about itself: counters, bytes, system calls, and
// message sizes in log2 buckets (as Chromium's IPC.MessageSize histogram).
//
//   node examples/stats.js

const path = require('path');
const procwire = require('procwire');

async function main() {
  const child = procwire.fork(path.join(__dirname, 'children', 'echo.js'), { child: 'procwire' });
  const echoed = new Promise((resolve) => {
    let n = 0;
    child.on('message', () => { if (++n === 1000) resolve(undefined); });
  });
  // 1000 messages from 10 bytes to about 40 KiB, all sent in one tick:
  // procwire gathers them into as few writes as the socket will take.
  for (let i = 0; i < 1000; i++) child.send({ i, pad: 'x'.repeat((i * 37) % 40_000) });
  await echoed;

  const s = child.channel.stats();
  console.log(`messages out/in: ${s.messagesOut}/${s.messagesIn}`);
  console.log(`bytes out/in:    ${s.bytesOut}/${s.bytesIn}`);
  console.log(`write/read calls: ${s.writeCalls}/${s.readCalls} (messages per write: ${(s.messagesOut / s.writeCalls).toFixed(1)})`);
  console.log(`queued ${s.queuedBytes} B, buffered ${s.bufferedBytes} B, decode errors ${s.decodeErrors}, pending requests ${s.pendingRequests}`);
  console.log('sizes of messages received (frame bytes):');
  for (const b of s.histogram.in) console.log(`  ${String(b.min).padStart(6)} .. ${String(b.max).padEnd(6)} ${'#'.repeat(Math.ceil(b.count / 10))} ${b.count}`);
  child.disconnect();
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
