'use strict';
// worker_threads as a peer of the round-trip and master/worker suites: the
// choice users weigh against processes. The worker runs the same peer
// script as the fork-style children (bench/peers/), which talk through
// worker_threads' parentPort when they find themselves in a worker; the
// driver side gets the transports.js interface (onmessage, send, close).

const { Worker } = require('worker_threads');

const WORKER_PEER = 'worker-threads';

async function openWorker(ctx, index = 0) {
  const worker = new Worker(ctx.script, { argv: ctx.args || [] });
  const t = {
    index,
    worker,
    onmessage: null,
    send: (m) => worker.postMessage(m),
    histogram: () => null,
    close: async () => {
      await worker.terminate();
    },
  };
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('worker not ready within 15000 ms')), 15000);
    let ready = false;
    worker.on('message', (m) => {
      if (!ready) {
        ready = true;
        clearTimeout(timer);
        if (m && m.ready) resolve(); else reject(new Error(`unexpected first message ${JSON.stringify(m)}`));
        return;
      }
      t.onmessage(m);
    });
    worker.on('error', (err) => { clearTimeout(timer); if (!ready) reject(err); });
  });
  return t;
}

// Several workers at once (the master/worker suite), as openMany does.
function openWorkers(ctx, count) {
  const out = [];
  for (let i = 0; i < count; i++) out.push(openWorker({ ...ctx, args: [...(ctx.args || []), String(i)] }, i));
  return Promise.all(out);
}

module.exports = { WORKER_PEER, openWorker, openWorkers };
