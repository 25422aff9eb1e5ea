'use strict';
// The task functions every pool's worker runs (each tool wraps them its own
// way: jest-worker calls the exports, workerpool and tinypool through the
// small adapters beside this file).

const { forkedByProcwire } = require('../helpers');

module.exports = {
  add(a, b) {
    return a + b;
  },
  // Echoes a string payload with its length, so big messages are checked end to end.
  echo(text) {
    return { length: text.length, head: text.slice(0, 16), tail: text.slice(-16) };
  },
  fail(message) {
    throw new Error(message);
  },
  sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms, ms));
  },
  crash() {
    process.exit(3);
  },
  whoami() {
    return { pid: process.pid, procwire: forkedByProcwire() };
  },
};
