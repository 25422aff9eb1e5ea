'use strict';
// What a process pays, in the parent, for its FIRST fork: each run is a
// fresh process that times, from just before it loads the fork it uses,
// to fork()'s return and to the child's first message, wall clock and its
// own CPU. The child is an empty script that sends one message. Ways:
//
//   child_process      require('child_process').fork(child)
//   procwire           require('<tree>').fork(child)
//   hook               node -r <tree>/lib/register.js, require('child_process').fork(child)
//   cluster            cluster.fork() in a primary
//   hook cluster       the same with -r <tree>/lib/register.js
//
//   node bench/parent-fork-start.js [runs] [other checkout ...]
//
// Every way and every checkout runs once per round, interleaved, in fresh
// processes; medians.

// child_process is not loaded here: each way's time includes loading it,
// as a process's first fork pays for it.
const path = require('path');

const ROOT = path.join(__dirname, '..');

function cpuMs() {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1000;
}

// One first fork in this process; prints the times as JSON.
function once(way, tree) {
  const t0 = performance.now();
  const cpu0 = cpuMs();
  let child;
  if (way === 'procwire') {
    child = require(tree).fork(__filename, ['--child']);
  } else if (way.endsWith('cluster')) {
    const cluster = require('cluster');
    cluster.setupPrimary({ exec: __filename, args: ['--child'] });
    child = cluster.fork();
  } else {
    child = require('child_process').fork(__filename, ['--child']);
  }
  const fork = { wall: performance.now() - t0, cpu: cpuMs() - cpu0 };
  child.once('message', () => {
    const message = { wall: performance.now() - t0, cpu: cpuMs() - cpu0 };
    process.stdout.write(JSON.stringify({ fork, message }));
    child.kill();
    process.exit(0);
  });
}

// The first message a cluster worker sends is 'online' (internal); the
// user-level one comes through worker.on('message').
if (process.argv[2] === '--child') {
  process.send('up');
} else if (process.argv[2] === '--once') {
  once(process.argv[3], process.argv[4]);
} else {
  main();
}

function runOnce(way, tree) {
  const hooked = way.startsWith('hook');
  const args = [...(hooked ? ['-r', path.join(tree, 'lib', 'register.js')] : []), __filename, '--once', way, tree];
  const out = require('child_process').execFileSync(process.execPath, args, { encoding: 'utf8', env: { ...process.env } });
  return JSON.parse(out);
}

function main() {
  const runs = Number(process.argv[2]) || 10;
  const trees = [ROOT, ...process.argv.slice(3).map((t) => path.resolve(t))];
  const cases = [['child_process', ROOT], ['cluster', ROOT]];
  for (const tree of trees) for (const way of ['procwire', 'hook', 'hook cluster']) cases.push([way, tree]);
  const results = cases.map(() => []);
  for (let i = 0; i < runs; i++) {
    cases.forEach(([way, tree], k) => results[k].push(runOnce(way, tree)));
  }
  const median = (values) => values.sort((a, b) => a - b)[values.length >> 1];
  const fmt = (rs, at) => `${median(rs.map((r) => r[at].wall)).toFixed(1)} / ${median(rs.map((r) => r[at].cpu)).toFixed(1)}`;
  console.log(`load average ${require('os').loadavg().map((l) => l.toFixed(1)).join(' ')}; ${runs} runs; wall / CPU ms, medians`);
  console.log('| way | checkout | to fork() return | to first message |');
  console.log('| --- | --- | --- | --- |');
  cases.forEach(([way, tree], k) => {
    console.log(`| ${way} | ${path.relative(process.cwd(), tree) || '.'} | ${fmt(results[k], 'fork')} | ${fmt(results[k], 'message')} |`);
  });
}
