'use strict';
// Node's cluster with an HTTP server in 2 workers, its primary forking them
// through procwire (procwire.cluster) or through Node. Round-robin
// scheduling: the primary accepts every connection and passes it to a worker
// over IPC (a NODE_HANDLE message with the descriptor), so with a new
// connection per request, the primary's IPC is on every request's path.
// Reported: requests/s (higher is better) and the primary's CPU% (its own
// process.cpuUsage over the window, the load generator excluded).
//
//   node bench/cluster-http.js [--quick]

const childProcess = require('child_process');
const http = require('http');
const path = require('path');
const harness = require('./lib/harness');

const CONCURRENCY = [4, 16];
const PEERS = [
  { id: 'procwire', label: 'procwire.cluster (workers forked through procwire.fork)' },
  { id: 'node', label: 'Node cluster (child_process.fork)' },
];

function request(port) {
  return new Promise((resolve, reject) => {
    // agent: false: a new connection each time, so each request is one
    // handle passed by the primary.
    http.get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      res.resume();
      res.on('end', resolve);
    }).on('error', reject);
  });
}

function ask(primary, op, key) {
  return new Promise((resolve) => {
    const on = (m) => {
      if (m && m[key] !== undefined) {
        primary.removeListener('message', on);
        resolve(m[key]);
      }
    };
    primary.on('message', on);
    if (op) primary.send({ op });
  });
}

async function measure(primary, port, concurrency, warmMs, windowMs) {
  let counting = false;
  let done = 0;
  let running = true;
  const loops = [];
  for (let i = 0; i < concurrency; i++) {
    loops.push((async () => {
      while (running) {
        await request(port);
        if (counting) done++;
      }
    })());
  }
  await harness.sleep(warmMs);
  const cpu0 = await ask(primary, 'cpu', 'cpu');
  counting = true;
  const t0 = harness.now();
  await harness.sleep(windowMs);
  counting = false;
  const wall = harness.now() - t0;
  const n = done;
  const cpu1 = await ask(primary, 'cpu', 'cpu');
  running = false;
  await Promise.all(loops);
  const cpuMs = (cpu1.user - cpu0.user + cpu1.system - cpu0.system) / 1000;
  return { rps: n / (wall / 1000), cpu: (cpuMs / wall) * 100 };
}

async function runDriver(config, tick) {
  const primary = childProcess.fork(path.join(__dirname, 'peers', 'cluster-primary.js'), [config.peer, 'rr'],
    { stdio: 'inherit' });
  try {
    const port = await ask(primary, null, 'port');
    const data = {};
    for (const c of config.concurrency) {
      data[c] = await measure(primary, port, c, config.warmMs, config.windowMs);
      tick();
    }
    return { data };
  } finally {
    const exited = new Promise((resolve) => primary.once('exit', resolve));
    primary.send({ op: 'stop' });
    const timer = setTimeout(() => primary.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}

async function plan({ quick, repeats }) {
  const warmMs = quick ? 200 : 500;
  const windowMs = quick ? 800 : 2000;
  return {
    name: 'cluster-http',
    title: 'cluster: HTTP server in 2 workers, a new connection per request: requests/s',
    description: 'Node\'s cluster (round-robin) with an HTTP server in 2 workers; C concurrent clients each make one ' +
      'request per connection, so the primary passes every connection to a worker over IPC. Requests/s: higher is ' +
      'better. Primary CPU% = the primary\'s own CPU time / wall time over the window.',
    script: __filename,
    xs: CONCURRENCY,
    xLabel: 'concurrent clients',
    xUnit: '',
    metrics: [
      { id: 'rps', label: 'requests/s', unit: '/s', better: 'higher' },
      { id: 'cpu', label: 'primary CPU %', unit: '%', better: 'lower' },
    ],
    chartMetrics: ['rps'],
    peers: PEERS.map((p) => ({ ...p })),
    repeats: repeats || (quick ? 3 : 5),
    ticksPerRun: CONCURRENCY.length,
    timeoutMs: 30000 + CONCURRENCY.length * (warmMs + windowMs + 5000),
    config: () => ({ concurrency: CONCURRENCY, warmMs, windowMs,
      hardLimitMs: 25000 + CONCURRENCY.length * (warmMs + windowMs + 5000) }),
    ratioTo: ['procwire'],
    notes: ['Round-robin scheduling; the load generator runs in the bench driver, not in the primary.'],
  };
}

module.exports = { name: 'cluster-http', inProcess: false, plan, runDriver };

if (require.main === module) {
  if (process.argv[2] === '--driver') harness.driverMain(runDriver);
  else require('./lib/cli').standalone('cluster-http');
}
