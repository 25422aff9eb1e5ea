'use strict';
// How much a child pays to start under each fork: child_process.fork, and
// procwire.fork with a plain child ('native', the preload) and a procwire
// child ('procwire'). Each start is timed from spawn to the first round
// trip (wall clock), and the child reports the CPU it used until its first
// answer, which a loaded machine does not inflate the way it does wall
// time. Interleaved runs, medians.
//
//   node bench/fork-start.js [runs] [other checkout]
//
// With another checkout (a before/after comparison), its procwire.fork
// starts are interleaved with this one's, each forking its own copy of this
// script.

// Nothing but path (which every Node process has loaded) at the top: the
// child roles below must load nothing of their own. A child forked by
// child_process.fork has child_process (and net and streams behind it)
// loaded by Node's own IPC set-up and a native procwire child has not, so
// a child that required it here would charge the native child 2-3 ms of
// CPU that child_process.fork's child does not show. What is measured is
// the fork's own cost; a child that uses child_process pays that under
// procwire.fork.
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

// kind: 'child_process.fork', or `[other: ]procwire.fork native|procwire`.
function startOnce(kind, other) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const root = kind.startsWith('other: ') ? other : ROOT;
    const script = path.join(root, 'bench', 'fork-start.js');
    let child;
    const done = (childCpu) => {
      resolve({ wall: performance.now() - t0, childCpu });
      child.kill();
    };
    if (kind === 'child_process.fork') {
      child = require('child_process').fork(__filename, ['--plain-child']);
    } else if (kind.endsWith('procwire.fork native')) {
      child = require(root).fork(script, ['--plain-child']);
    } else {
      child = require(root).fork(script, ['--procwire-child'], { child: 'procwire' });
      child.request(0).then(done);
      return;
    }
    child.once('message', done);
    child.send(0);
  });
}

async function main() {
  const runs = Number(process.argv[2]) || 10;
  const other = process.argv[3] === undefined ? null : path.resolve(process.argv[3]);
  const kinds = ['child_process.fork', 'procwire.fork native', 'procwire.fork procwire'];
  if (other !== null) kinds.push('other: procwire.fork native', 'other: procwire.fork procwire');
  const results = Object.fromEntries(kinds.map((k) => [k, []]));
  // The parent's own load is not what is measured.
  require(ROOT);
  if (other !== null) require(other);
  for (let i = 0; i < runs; i++) {
    for (const kind of kinds) results[kind].push(await startOnce(kind, other));
  }
  const median = (values) => values.sort((a, b) => a - b)[values.length >> 1];
  for (const kind of kinds) {
    const wall = median(results[kind].map((r) => r.wall));
    const cpu = median(results[kind].map((r) => r.childCpu));
    console.log(`${kind.padEnd(31)} spawn to first round trip ${wall.toFixed(1)} ms; child CPU until its first answer ${cpu.toFixed(1)} ms`);
  }
}
