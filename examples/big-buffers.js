'use strict';
// Big buffers between procwire peers on one machine: a Buffer of 256 KiB or
// more goes through a sealed shared-memory segment instead of the socket (one
// copy, no bytes through the kernel's socket buffers), and a buffer from
// procwire.alloc() sent with { transfer } moves without any copy: the sender's
// copy is detached, as with postMessage transfer lists.
//
//   node examples/big-buffers.js

const path = require('path');
const procwire = require('procwire');

const MiB = 1024 * 1024;

async function main() {
  const child = procwire.fork(path.join(__dirname, 'children', 'checksum-worker.js'), {
    child: 'procwire', serialization: 'advanced' });

  await child.request({ data: Buffer.alloc(1) });  // The child is up: time only the transfers.

  // 1. An ordinary Buffer: copied once into a sealed segment, mapped by the child.
  const copied = Buffer.alloc(32 * MiB, 7);
  const t = process.hrtime.bigint();
  const reply = await child.request({ data: copied });
  console.log(`sealed copy: ${reply.bytes / MiB} MiB, sum ${reply.sum}, ${ms(t)} ms round trip`);

  // 2. alloc() + transfer: the segment itself changes hands, no byte copied.
  const handed = procwire.alloc(32 * MiB);
  handed.fill(1);
  const arrived = new Promise((resolve) => child.once('message', resolve));
  child.send({ data: handed }, null, { transfer: [handed] });
  console.log(`after send with transfer, the sender's buffer is detached: length ${handed.length}`);
  const ack = await arrived;
  console.log(`child received the transferred buffer: ${ack.bytes / MiB} MiB, sum ${ack.sum}`);

  const { outOfLine } = child.channel.stats();
  console.log(`through shared memory: ${outOfLine.messagesOut} messages, ${outOfLine.bytesOut / MiB} MiB`);
  child.disconnect();
}

function ms(start) {
  return (Number(process.hrtime.bigint() - start) / 1e6).toFixed(1);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
