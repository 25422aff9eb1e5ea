'use strict';
// A worker of the master/worker suite (the 2016 Habr study): runs C
// concurrent request/reply loops against the master while told to.
//   master -> { op: 'start', c, len }   start C loops with a payload of len bytes
//   master -> { op: 'stop' }            finish the loops; reply { op: 'stopped' }
//   worker -> { id, payload }           a request; the master echoes it
// Uses procwire's end when forked with { child: 'procwire' }, else process.

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

let running = false;
let inflight = 0;
let payload = '';

channel.on('message', (m) => {
  if (m.op === 'start') {
    running = true;
    payload = '.'.repeat(m.len);
    for (let i = 0; i < m.c; i++) {
      inflight++;
      channel.send({ id: i, payload });
    }
  } else if (m.op === 'stop') {
    running = false;
    if (inflight === 0) channel.send({ op: 'stopped' });
  } else {
    inflight--;
    if (running) {
      inflight++;
      channel.send({ id: m.id, payload });
    } else if (inflight === 0) {
      channel.send({ op: 'stopped' });
    }
  }
});
channel.on('disconnect', () => process.exit(0));
channel.send({ ready: true });
