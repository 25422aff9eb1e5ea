'use strict';
// One task at a time on a warm, idle pool against a bare request() round
// trip to one procwire child: what the pool adds to a single task. Each
// side runs in its own process (a process with one channel polls for its
// reply as a lone pool or child would), alternating, several times.
//
//   node bench/pool-latency.js [rounds]

const childProcess = require('child_process');
const path = require('path');

const ROOT = path.join(__dirname, '..');
const TASK = path.join(__dirname, 'peers', 'pool-task.js');
const TASKS = 3000;
const SKIP = 500;  // the first ones warm the code up

async function side(kind) {
  const procwire = require(ROOT);
  let run;
  let end;
  if (kind === 'pool') {
    const pool = new procwire.Pool({ filename: TASK, minWorkers: 1, maxWorkers: 1 });
    run = (v) => pool.run(v);
    end = () => pool.destroy();
  } else {
    const child = procwire.fork(path.join(__dirname, 'peers', 'pool-responder.js'), { child: 'procwire', serialization: 'advanced' });
    run = (v) => child.request(v, { timeout: 0 });
    end = () => child.kill();
  }
  const times = [];
  for (let i = 0; i < TASKS; i++) {
    const t0 = performance.now();
    await run({ a: i, b: 1 });
    if (i >= SKIP) times.push((performance.now() - t0) * 1000);
  }
  await end();
  times.sort((a, b) => a - b);
  process.stdout.write(JSON.stringify({ p50: times[times.length >> 1], p90: times[Math.floor(times.length * 0.9)] }));
}

function main() {
  const rounds = Number(process.argv[2]) || 4;
  const got = { pool: [], request: [] };
  for (let i = 0; i < rounds; i++) {
    for (const kind of ['pool', 'request']) {
      const out = childProcess.execFileSync(process.execPath, [__filename, '--side', kind], { encoding: 'utf8', timeout: 120_000 });
      got[kind].push(JSON.parse(out));
    }
  }
  const median = (values) => values.sort((a, b) => a - b)[values.length >> 1];
  const p50 = { pool: median(got.pool.map((r) => r.p50)), request: median(got.request.map((r) => r.p50)) };
  for (const kind of ['pool', 'request']) {
    console.log(`${kind.padEnd(8)} single task p50 ${p50[kind].toFixed(1)} µs, p90 ${median(got[kind].map((r) => r.p90)).toFixed(1)} µs`);
  }
  console.log(`pool ÷ bare request() at p50: ×${(p50.pool / p50.request).toFixed(2)}`);
}

if (process.argv[2] === '--side') side(process.argv[3]);
else main();
