'use strict';
// Whether this is the process's main thread, without loading worker_threads
// where that can be told for free: a Worker's bootstrap has always loaded
// worker_threads (and streams behind it) already, while a main thread that
// has not loaded it is the main thread. Requiring it in the main thread, only
// to read isMainThread, cost a forked child about 2 ms of its start.

function isMainThread() {
  if (!process.moduleLoadList.includes('NativeModule worker_threads')) return true;
  return require('worker_threads').isMainThread;
}

module.exports = { isMainThread };
