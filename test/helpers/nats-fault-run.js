'use strict';
// The NATS fault run: `requests` requests from 2 caller processes to 4
// worker processes over a 3-server JetStream cluster; once a third of the
// replies are in, two workers and one nats-server are killed with SIGKILL.
// mode 'durable' uses durable channels (JetStream work queue), mode 'core'
// core NATS channels (each caller opens one channel per worker it can reach
// and spreads its requests over them). Used by test/fault/nats-durable.test.js;
// run by itself (`node test/helpers/nats-fault-run.js durable 20000`) it
// prints its result as JSON.
//
// Run with argv[2] 'worker' or 'caller' this file is one of those processes.

const childProcess = require('child_process');
const procwire = require('../..');
const { startJetStreamCluster } = require('./nats-cluster');

const WINDOW = 256;            // requests in flight per caller
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the processes -----------------------------------------------------------------

async function worker(config) {
  const answered = new Map();
  const server = procwire.listen(config.servers[0], {
    subject: config.subject, servers: config.servers.slice(1), durable: config.mode === 'durable',
    ackWait: config.ackWait, concurrency: 32, heartbeat: 500, peerTimeout: 3000,
    nats: { reconnectTimeWait: 100, pingInterval: 1000, maxPingOut: 2 },
  }, (ch) => {
    ch.on('error', () => {});
    ch.respond((v) => {
      answered.set(v.c, (answered.get(v.c) || 0) + 1);
      return { c: v.c, i: v.i, pid: process.pid };
    });
  });
  await server.ready;
  process.on('message', (m) => {
    if (m !== 'stats') return;
    let redeliveries = 0;
    let duplicatesSuppressed = 0;
    let republished = 0;
    for (const ch of server.channels) {
      const st = ch.stats();
      redeliveries += st.redeliveries || 0;
      duplicatesSuppressed += st.duplicatesSuppressed || 0;
      republished += st.republished || 0;
    }
    const total = [...answered.values()].reduce((a, b) => a + b, 0);
    process.send({ stats: { pid: process.pid, answered: total, redeliveries, duplicatesSuppressed, republished } });
  });
  process.send({ ready: true });
}

async function openCoreChannels(config) {
  // A core channel goes to one worker (the queue group picks it): open
  // channels until every worker has one, or a few more than workers.
  const channels = [];
  const peers = new Set();
  for (let i = 0; i < config.workers * 4 && peers.size < config.workers; i++) {
    const ch = await procwire.connect(config.servers[0], {
      subject: config.subject, servers: config.servers.slice(1), heartbeat: 500, peerTimeout: 3000,
      nats: { reconnectTimeWait: 100, pingInterval: 1000, maxPingOut: 2 },
    });
    ch.on('error', () => {});
    const { pid } = await ch.request({ c: -1, i: -1 }, { timeout: 10_000 });
    if (peers.has(pid)) { ch.close(); continue; }
    peers.add(pid);
    channels.push(ch);
  }
  return channels;
}

async function caller(config) {
  const channels = config.mode === 'durable'
    ? [await procwire.connect(config.servers[0], {
      subject: config.subject, servers: config.servers.slice(1), durable: true, ackWait: config.ackWait,
      nats: { reconnectTimeWait: 100, pingInterval: 1000, maxPingOut: 2 },
    })]
    : await openCoreChannels(config);
  // A core channel whose worker died is closed (or found unreachable): later
  // requests go to the channels still open, so what is lost is mostly what
  // was in flight.
  const open = new Set(channels);
  for (const ch of channels) {
    ch.on('error', () => {});
    ch.once('close', () => open.delete(ch));
  }
  process.send({ ready: true });
  await new Promise((r) => process.once('message', r));
  const result = { ok: 0, wrong: 0, lost: 0, errors: {} };
  let next = 0;
  let done = 0;
  const t0 = Date.now();
  const progress = setInterval(() => process.send({ progress: done }), 250);
  async function lane() {
    while (next < config.requests) {
      const i = next++;
      const live = open.size > 0 ? [...open] : channels;
      const ch = live[i % live.length];
      try {
        const reply = await ch.request({ c: config.id, i }, { timeout: config.timeout });
        if (reply.c === config.id && reply.i === i) result.ok++; else result.wrong++;
      } catch (err) {
        // No responders: that worker is gone; stop sending it requests
        // before the heartbeat closes its channel, as a careful user would.
        if (err.code === 'ERR_PROCWIRE_PEER_UNREACHABLE') open.delete(ch);
        result.lost++;
        result.errors[err.code] = (result.errors[err.code] || 0) + 1;
      }
      done++;
    }
  }
  await Promise.all(Array.from({ length: WINDOW }, lane));
  clearInterval(progress);
  result.ms = Date.now() - t0;
  result.stats = channels.map((ch) => {
    const st = ch.stats();
    return { duplicatesSuppressed: st.duplicatesSuppressed || 0, lateReplies: st.lateReplies || 0, republished: st.republished || 0 };
  });
  process.send({ result });
}

// ---- the run ----------------------------------------------------------------------

function spawn(role, config, children) {
  const child = childProcess.fork(__filename, [role, JSON.stringify(config)], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  children.add(child);
  child.exitedP = new Promise((r) => child.once('exit', r));
  child.on('error', () => {});
  return child;
}

function nextMessage(child, test, ms, what) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { cleanup(); reject(new Error(`no ${what} within ${ms} ms`)); }, ms);
    const onExit = () => { cleanup(); reject(new Error(`${what}: the process exited`)); };
    const onMessage = (m) => { if (test(m)) { cleanup(); resolve(m); } };
    function cleanup() {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
    }
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

async function killProcess(child) {
  if (child.exitCode === null && child.signalCode === null) {
    try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ }
  }
  await child.exitedP;
}

// -> { mode, requests, replies, wrong, lost, errors, redeliveries, duplicatesSuppressed (duplicatesAtStream +
// duplicatesAtCaller), lateReplies, republished, answeredBySurvivors, killedAt, ms, reqPerSec }
async function faultRun({ mode, requests, deadlineMs = 170_000, log = () => {} }) {
  const cluster = await startJetStreamCluster(3);
  const children = new Set();
  const subject = `fault.${process.pid}.${mode}`;
  const ackWait = 2000;
  try {
    const rotate = (k) => cluster.urls.slice(k % 3).concat(cluster.urls.slice(0, k % 3));
    const workers = [0, 1, 2, 3].map((k) => spawn('worker', { mode, subject, servers: rotate(k), ackWait }, children));
    await Promise.all(workers.map((w) => nextMessage(w, (m) => m.ready, 60_000, 'a ready worker')));
    const per = Math.ceil(requests / 2);
    const callers = [0, 1].map((k) => spawn('caller', {
      mode, subject, id: k, servers: rotate(k + 1), requests: per, workers: 4, ackWait,
      timeout: mode === 'durable' ? deadlineMs : 5000,
    }, children));
    await Promise.all(callers.map((c) => nextMessage(c, (m) => m.ready, 60_000, 'a ready caller')));
    const results = callers.map((c) => nextMessage(c, (m) => m.result, deadlineMs, 'the callers\' results'));
    const progress = [0, 0];
    callers.forEach((c, k) => c.on('message', (m) => { if (m.progress !== undefined) progress[k] = m.progress; }));
    const t0 = Date.now();
    for (const c of callers) c.send('go');
    // Kill once a third of the requests are answered.
    while (progress[0] + progress[1] < (per * 2) / 3 && Date.now() - t0 < deadlineMs) await sleep(20);
    // The two workers that have answered most are killed: they hold work in
    // progress. Which workers a durable stream feeds is its choice, and one
    // it happened to feed little would let the kill miss the run.
    const answered = await Promise.all(workers.map(async (w) => {
      w.send('stats');
      return (await nextMessage(w, (m) => m.stats, 10_000, 'worker stats')).stats.answered;
    }));
    const busiest = [0, 1, 2, 3].sort((a, b) => answered[b] - answered[a]);
    const killed = busiest.slice(0, 2).map((k) => workers[k]);
    const survivors = busiest.slice(2).map((k) => workers[k]);
    const killedAt = progress[0] + progress[1];
    log(`# killing workers ${killed[0].pid}, ${killed[1].pid} (answered ${answered.join(', ')}) and nats-server ` +
      `${cluster.nodes[1].spec.name} after ${killedAt} replies`);
    await Promise.all([killProcess(killed[0]), killProcess(killed[1]), cluster.nodes[1].kill()]);
    const out = (await Promise.all(results)).map((m) => m.result);
    const ms = Date.now() - t0;
    const stats = await Promise.all(survivors.map(async (w) => {
      w.send('stats');
      return (await nextMessage(w, (m) => m.stats, 10_000, 'worker stats')).stats;
    }));
    const sum = (xs, f) => xs.reduce((a, x) => a + f(x), 0);
    const errors = {};
    for (const r of out) for (const [k, v] of Object.entries(r.errors)) errors[k] = (errors[k] || 0) + v;
    return {
      mode, requests: per * 2, replies: sum(out, (r) => r.ok), wrong: sum(out, (r) => r.wrong), lost: sum(out, (r) => r.lost), errors,
      redeliveries: sum(stats, (s) => s.redeliveries),
      duplicatesSuppressed: sum(stats, (s) => s.duplicatesSuppressed) + sum(out, (r) => sum(r.stats, (s) => s.duplicatesSuppressed)),
      // Of which: second replies the stream dropped (counted by workers),
      // and replies delivered to a caller again (its ack lost), dropped there.
      duplicatesAtStream: sum(stats, (s) => s.duplicatesSuppressed),
      duplicatesAtCaller: sum(out, (r) => sum(r.stats, (s) => s.duplicatesSuppressed)),
      lateReplies: sum(out, (r) => sum(r.stats, (s) => s.lateReplies)),
      republished: sum(out, (r) => sum(r.stats, (s) => s.republished)) + sum(stats, (s) => s.republished),
      answeredBySurvivors: sum(stats, (s) => s.answered),
      killedAt, ms, reqPerSec: Math.round((per * 2) / (ms / 1000)),
    };
  } finally {
    await Promise.all([...children].map(killProcess));
    await cluster.stop();
  }
}

if (process.argv[2] === 'worker' || process.argv[2] === 'caller') {
  process.on('disconnect', () => process.exit(0));
  const main = process.argv[2] === 'worker' ? worker : caller;
  main(JSON.parse(process.argv[3])).catch((err) => {
    process.stderr.write(`fault run ${process.argv[2]}: ${err.stack || err}\n`);
    process.exit(1);
  });
} else if (require.main === module) {
  faultRun({ mode: process.argv[2] || 'durable', requests: Number(process.argv[3] || 20000), log: (s) => console.log(s) })
    .then((r) => console.log(JSON.stringify(r, null, 2)), (err) => { console.error(err); process.exitCode = 1; });
}

module.exports = { faultRun };
