'use strict';
// node scripts/cpu-ab.js <procwire checkout> [bytes] [messages] [in flight]: CPU time
// (user + system, parent and child) per round trip of a procwire fork echo
// with 256 (or [in flight]) messages in flight, after a warm-up. CPU time, unlike wall time,
// barely moves on a loaded machine, so two checkouts can be compared A B A B
// there (issue 30's speed gate on a shared 2-core machine).
const root = process.argv[2];
const bytes = Number(process.argv[3] || 64);
const total = Number(process.argv[4] || 100000);
const window = Number(process.argv[5] || 256);
const procwire = require(root);
const child = procwire.fork(require('path').join(__dirname, 'cpu-ab-child.js'));
const msg = { payload: '.'.repeat(bytes) };
let sent = 0;
let got = 0;
const warm = Math.min(20000, total / 5);
let c0;
let t0;
child.on('message', (m) => {
  if (m && m.cpu) {
    const p = process.cpuUsage(c0.parent);
    const c = { user: m.cpu.user - c0.child.user, system: m.cpu.system - c0.child.system };
    const us = (p.user + p.system + c.user + c.system) / (total - warm);
    const wall = Number(process.hrtime.bigint() - t0) / 1e3 / (total - warm);
    console.log(JSON.stringify({ root, bytes, cpuUsPerRt: +us.toFixed(3), parentUs: +((p.user + p.system) / (total - warm)).toFixed(3), wallUsPerRt: +wall.toFixed(3) }));
    child.kill();
    return;
  }
  got++;
  if (got === warm) {
    c0 = { parent: process.cpuUsage() };
    child.send('cpu');
    return;
  }
  if (got === total) { child.send('cpu'); return; }
  if (sent < total) { sent++; child.send(msg); }
});
let waitingCpu = true;
const origOn = child.listeners('message')[0];
child.removeAllListeners('message');
child.on('message', (m) => {
  if (waitingCpu && m && m.cpu) {
    waitingCpu = false;
    c0.child = m.cpu;
    t0 = process.hrtime.bigint();
    for (let i = 0; i < window && sent < total; i++) { sent++; child.send(msg); }
    return;
  }
  origOn(m);
});
for (let i = 0; i < window && sent < warm; i++) { sent++; child.send(msg); }
