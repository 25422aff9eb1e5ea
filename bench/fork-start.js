'use strict';
// How much a child pays to start under each fork: child_process.fork, and
// procwire.fork with a plain child ('native', the preload) and a procwire
// child ('procwire'). Each start is timed from spawn to the first round
// trip (wall clock), and the child reports the CPU it used until its first
// answer, which a loaded machine does not inflate the way it does wall
// time. Interleaved runs, medians.
//
//   node bench/fork-start.js [runs]

const childProcess = require('child_process');
const path = require('path');

const ROOT = path.join(__dirname, '..');
const role = process.argv[2];

function cpuMs() {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1000;
}

if (role === '--plain-child') {
  process.on('message', () => process.send(cpuMs()));
} else if (role === '--procwire-child') {
  require(ROOT).parent.respond(() => cpuMs());
} else {
  main();
}

function startOnce(kind) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let child;
    const done = (childCpu) => {
      resolve({ wall: performance.now() - t0, childCpu });
      child.kill();
    };
    if (kind === 'child_process.fork') {
      child = childProcess.fork(__filename, ['--plain-child']);
    } else if (kind === 'procwire.fork native') {
      child = require(ROOT).fork(__filename, ['--plain-child']);
    } else {
      child = require(ROOT).fork(__filename, ['--procwire-child'], { child: 'procwire' });
      child.request(0).then(done);
      return;
    }
    child.once('message', done);
    child.send(0);
  });
}

async function main() {
  const runs = Number(process.argv[2]) || 10;
  const kinds = ['child_process.fork', 'procwire.fork native', 'procwire.fork procwire'];
  const results = Object.fromEntries(kinds.map((k) => [k, []]));
  require(ROOT);  // the parent's own load is not what is measured
  for (let i = 0; i < runs; i++) {
    for (const kind of kinds) results[kind].push(await startOnce(kind));
  }
  const median = (values) => values.sort((a, b) => a - b)[values.length >> 1];
  for (const kind of kinds) {
    const wall = median(results[kind].map((r) => r.wall));
    const cpu = median(results[kind].map((r) => r.childCpu));
    console.log(`${kind.padEnd(24)} spawn to first round trip ${wall.toFixed(1)} ms; child CPU until its first answer ${cpu.toFixed(1)} ms`);
  }
}
