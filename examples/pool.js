'use strict';
// procwire.Pool: a pool of worker processes with piscina's API. Jobs go to
// the least busy worker; a failing handler rejects just its task; the
// stats say how long tasks ran and waited; close() lets the workers go.
//
//   node examples/pool.js

const path = require('path');
const { Pool } = require('procwire');

async function main() {
  const pool = new Pool({ filename: path.join(__dirname, 'children', 'pool-task.js'), minWorkers: 2, maxWorkers: 2 });
  const jobs = Array.from({ length: 40 }, (_, i) => pool.run({ n: 20_000 + i }));
  const results = await Promise.all(jobs);
  const byWorker = {};
  for (const r of results) byWorker[r.pid] = (byWorker[r.pid] || 0) + 1;
  console.log('primes below 20000:', results[0].primes);   // → primes below 20000: 2262
  console.log('jobs per worker pid:', byWorker);

  try {
    await pool.run(null, { name: 'fail' });
  } catch (err) {
    console.log(err.code, err.message);                    // → ERR_PROCWIRE_REMOTE_ERROR no primes today
  }

  const { completed, runTime, waitTime } = pool.stats();
  console.log(`${completed} tasks; run time p50 ${runTime.p50.toFixed(2)} ms, wait time p99 ${waitTime.p99.toFixed(2)} ms`);
  await pool.close();
  console.log('closed');                                   // → closed
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
