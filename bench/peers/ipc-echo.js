'use strict';
// Child of the fork-style peers. Uses procwire's end of the channel when the
// parent forked it with { child: 'procwire' }, else Node's built-in
// process.send (procwire is then not even loaded, so this also runs under
// another Node line).
//   mode 'echo' (default): sends every message back.
//   mode 'latency': replies { lat } with the one-way latency in ns, from the
//     sender's CLOCK_MONOTONIC timestamp m.t (process.hrtime is system-wide).

const path = require('path');

const { isMainThread, parentPort } = require('worker_threads');

// In a worker thread (the worker_threads peer) the channel is parentPort,
// which says postMessage for send; the thread ends when the driver
// terminates it.
const channel = !isMainThread
  ? { on: (event, fn) => { if (event === 'message') parentPort.on('message', fn); }, send: (m) => parentPort.postMessage(m) }
  : process.env.PROCWIRE_CHANNEL_FD !== undefined
    ? require(path.join(__dirname, '..', '..')).parent
    : process;
const mode = process.argv[2] || 'echo';

if (mode === 'latency') {
  channel.on('message', (m) => {
    const lat = Number(process.hrtime.bigint()) - m.t;
    channel.send({ lat, n: m.data.length });
  });
} else {
  channel.on('message', (m) => channel.send(m));
}
channel.on('disconnect', () => process.exit(0));
channel.send({ ready: true });
