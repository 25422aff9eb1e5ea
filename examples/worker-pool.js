'use strict';
// A worker pool: one procwire child per CPU (at least two), each answering
// requests; jobs go to the least busy worker, and every worker is closed at
// the end so the program exits by itself.
//
//   node examples/worker-pool.js

const os = require('os');
const path = require('path');
const { fork } = require('procwire');

class Pool {
  constructor(file, size) {
    this.workers = Array.from({ length: size }, () => ({
      child: fork(file, { child: 'procwire' }),
      busy: 0,
    }));
  }

  async run(job) {
    const w = this.workers.reduce((a, b) => (b.busy < a.busy ? b : a));
    w.busy++;
    try {
      return await w.child.request(job, { timeout: 10_000 });
    } finally {
      w.busy--;
    }
  }

  close() {
    for (const w of this.workers) w.child.disconnect();
  }
}

async function main() {
  const pool = new Pool(path.join(__dirname, 'children', 'pool-worker.js'), Math.max(2, os.availableParallelism()));
  const jobs = Array.from({ length: 40 }, (_, i) => ({ n: 20_000 + i }));
  const started = process.hrtime.bigint();
  const results = await Promise.all(jobs.map((job) => pool.run(job)));
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const byWorker = {};
  for (const r of results) byWorker[r.pid] = (byWorker[r.pid] || 0) + 1;
  console.log(`${results.length} jobs in ${ms.toFixed(0)} ms; jobs per worker pid:`, byWorker);
  console.log('primes below 20000:', results[0].primes);
  pool.close();
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
