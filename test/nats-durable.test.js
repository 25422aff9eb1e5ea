'use strict';
// Durable request/reply over NATS JetStream (lib/transport/nats/durable.js)
// against real nats-server processes: one JetStream server (R1) and a
// 3-server cluster (R3), workers in separate processes that are killed,
// stopped and resumed. Run with process.argv[2] === 'child' this file is such
// a worker.

const assert = require('node:assert');
const childProcess = require('node:child_process');
const procwire = require('..');
const { sleep, withTimeout, until, exitOf, killChild } = require('./helpers/wait');
const { startJetStreamCluster, natsServerInstalled } = require('./helpers/nats-cluster');

const CLIENTS = ['@nats-io/transport-node', 'nats'];

// ---- child mode: a worker process ----------------------------------------------------

// Tells the parent each request it takes ({ took }) and answers it after
// config.delay ms (never, with config.hang); 'stats' asks for its channel's
// stats.
async function childMain() {
  const config = JSON.parse(process.argv[3]);
  const { hang, delay, ...options } = config.options;
  const server = procwire.listen(config.servers[0], { ...options, servers: config.servers.slice(1), durable: true },
    (ch) => {
      ch.on('error', () => {});
      ch.respond(async (v) => {
        process.send({ took: v.i });
        if (hang) await new Promise(() => {});
        if (delay) await sleep(delay);
        return { i: v.i, pid: process.pid };
      });
    });
  await server.ready;
  process.on('message', (m) => {
    if (m === 'stats') process.send({ stats: [...server.channels][0].stats() });
  });
  process.send({ ready: true });
}

if (process.argv[2] === 'child') {
  process.on('disconnect', () => process.exit(0));
  childMain().catch((err) => {
    process.stderr.write(`durable worker: ${err.stack || err}\n`);
    process.exit(1);
  });
} else {
  tests();
}

function tests() {
  const { describe, it, before, after } = require('node:test');
  const skip = natsServerInstalled ? false : 'nats-server is not installed (scripts/setup.sh installs it)';
  const children = new Set();
  const opened = new Set();
  let n = 0;
  const subject = () => `durable.${process.pid}.${++n}`;

  const track = (thing) => { opened.add(thing); return thing; };
  const listen = (...args) => track(procwire.listen(...args));
  const connect = (...args) => procwire.connect(...args).then(track);

  function spawnWorker(servers, options) {
    const child = childProcess.fork(__filename, ['child', JSON.stringify({ servers, options })],
      { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const exited = exitOf(child);
    children.add(child);
    exited.then(() => children.delete(child));
    const taken = [];
    child.on('message', (m) => { if (m.took !== undefined) taken.push(m.took); });
    const ready = withTimeout(new Promise((resolve, reject) => {
      child.on('message', (m) => { if (m.ready) resolve(); });
      exited.then(({ code, signal }) => reject(new Error(`worker exited (${code}, ${signal})`)));
    }), 30_000, 'a durable worker to start');
    return { child, exited, taken, ready };
  }

  function childStats(w) {
    return withTimeout(new Promise((resolve) => {
      const on = (m) => { if (m.stats) { w.child.off('message', on); resolve(m.stats); } };
      w.child.on('message', on);
      w.child.send('stats');
    }), 10_000, 'worker stats');
  }

  async function cleanup() {
    for (const thing of opened) {
      try {
        if (typeof thing.destroy === 'function') thing.destroy(); else thing.close();
      } catch { /* closed */ }
    }
    opened.clear();
    await Promise.all([...children].map((c) => killChild(c)));
  }

  // A plain JetStream manager on the maintained client, to look at streams.
  async function streamInfo(url, name) {
    const { connect: natsConnect } = require('@nats-io/transport-node');
    const { jetstreamManager } = require('@nats-io/jetstream');
    const nc = await natsConnect({ servers: url });
    try {
      return await (await jetstreamManager(nc)).streams.info(name);
    } finally {
      await nc.close();
    }
  }

  // A responder for each of several workers that holds every request until
  // `total` run at once across them all: one worker runs fewer, so the
  // total is reached only if the requests are spread over the workers. The
  // hold ends at the latest `ms` after the first request came, so a test
  // that fails does so by its assertions on `answered` (request indexes per
  // worker), not by hanging.
  function heldTogether(total, ms) {
    let running = 0;
    let release;
    const released = new Promise((resolve) => { release = resolve; });
    let deadline = null;
    const answered = [];
    const responder = (k) => {
      answered[k] = [];
      return (w) => {
        w.on('error', () => {});
        w.respond(async (v) => {
          answered[k].push(v.i);
          if (deadline === null) deadline = setTimeout(() => release(false), ms);
          if (++running === total) release(true);
          await released;
          return v.i;
        });
      };
    };
    const done = () => { clearTimeout(deadline); release(false); };
    return { responder, answered, released, running: () => running, done };
  }

  describe('durable NATS channels on one JetStream server', { skip, timeout: 120_000 }, () => {
    let js;
    before(async () => { js = await startJetStreamCluster(1); });
    after(async () => {
      await cleanup();
      if (js) await js.stop();
    });

    for (const natsClient of CLIENTS) {
      it(`answers requests through the work queue, errors coded (${natsClient})`, { timeout: 60_000 }, async () => {
        const s = subject();
        const server = listen(js.urls[0], { subject: s, durable: true, natsClient }, (ch) => {
          ch.respond(async (v) => {
            if (v.i % 10 === 3) throw Object.assign(new Error(`bad ${v.i}`), { code: 'E_BAD' });
            return v.i * 2;
          });
        });
        await server.ready;
        const ch = await connect(js.urls[0], { subject: s, durable: true, natsClient });
        assert.strictEqual(ch.transport, 'nats');
        const results = await Promise.allSettled(Array.from({ length: 500 }, (_, i) => ch.request({ i }, { timeout: 30_000 })));
        results.forEach((r, i) => {
          if (i % 10 === 3) {
            assert.strictEqual(r.reason.code, 'ERR_PROCWIRE_REMOTE_ERROR');
            assert.strictEqual(r.reason.remote.code, 'E_BAD');
          } else {
            assert.strictEqual(r.value, i * 2, String(r.reason));
          }
        });
        const st = ch.stats();
        assert.strictEqual(st.messagesOut, 500);
        assert.strictEqual(st.messagesIn, 500);
        assert.strictEqual(st.duplicatesSuppressed, 0);
        const info = await streamInfo(js.urls[0], ch.stream);
        assert.strictEqual(info.config.retention, 'workqueue');
        assert.strictEqual(info.config.num_replicas, 1);
        // Plain messages have no place in a work queue.
        assert.throws(() => ch.send({ x: 1 }), { code: 'ERR_PROCWIRE_INVALID_ARG' });
        ch.close();
        server.close();
      });
    }

    it('keeps requests for a worker that is not there yet', { timeout: 60_000 }, async () => {
      const s = subject();
      const ch = await connect(js.urls[0], { subject: s, durable: true });
      const pending = Array.from({ length: 50 }, (_, i) => ch.request({ i }, { timeout: 30_000 }));
      await sleep(300);
      const server = listen(js.urls[0], { subject: s, durable: true }, (w) => w.respond((v) => v.i + 1));
      await server.ready;
      assert.deepStrictEqual(await Promise.all(pending), Array.from({ length: 50 }, (_, i) => i + 1));
      ch.close();
      server.close();
    });

    it('times out and aborts with coded errors, and a cancelled request leaves the queue', { timeout: 60_000 }, async () => {
      const s = subject();
      const ch = await connect(js.urls[0], { subject: s, durable: true });
      await assert.rejects(ch.request({ i: 1 }, { timeout: 300 }), { code: 'ERR_PROCWIRE_REQUEST_TIMEOUT' });
      const ac = new AbortController();
      const aborted = ch.request({ i: 2 }, { signal: ac.signal });
      await sleep(200);
      ac.abort();
      await assert.rejects(aborted, { code: 'ERR_PROCWIRE_REQUEST_ABORTED' });
      await until(async () => (await streamInfo(js.urls[0], ch.stream)).state.messages === 0, 10_000, 'the cancelled requests to leave the stream');
      assert.strictEqual(ch.stats().cancelled, 2);
      // A worker that starts now sees only the request still wanted.
      const seen = [];
      const server = listen(js.urls[0], { subject: s, durable: true }, (w) => w.respond((v) => { seen.push(v.i); return v.i; }));
      await server.ready;
      assert.strictEqual(await ch.request({ i: 3 }, { timeout: 30_000 }), 3);
      assert.deepStrictEqual(seen, [3]);
      // Closing settles what is pending.
      server.close();
      const pending = ch.request({ i: 4 }, { timeout: 30_000 });
      await sleep(100);
      ch.close();
      await assert.rejects(pending, { code: 'ERR_PROCWIRE_CHANNEL_CLOSED' });
    });

    it('refuses bad durable options, coded', async () => {
      const url = js.urls[0];
      for (const bad of [{ storage: 'disk' }, { queue: 'a.b' }, { ackWait: 0 }, { replicas: 9 }, { stream: 'a b' },
        { concurrency: -1 }, { natsClient: 'nats.ws' }]) {
        await assert.rejects(connect(url, { subject: 'x', durable: true, ...bad }), { code: 'ERR_PROCWIRE_INVALID_ARG' }, JSON.stringify(bad));
        assert.throws(() => procwire.listen(url, { subject: 'x', durable: true, ...bad }), { code: 'ERR_PROCWIRE_INVALID_ARG' }, JSON.stringify(bad));
      }
    });

    it('runs at most `concurrency` requests per worker; progress acks keep a long one from moving', { timeout: 60_000 }, async () => {
      const s = subject();
      let running = 0;
      let most = 0;
      const runs = new Map();
      const server = listen(js.urls[0], { subject: s, durable: true, concurrency: 2, ackWait: 1000 }, (w) => {
        w.respond(async (v) => {
          runs.set(v.i, (runs.get(v.i) || 0) + 1);
          running++;
          most = Math.max(most, running);
          await sleep(v.long ? 3000 : 20);
          running--;
          return v.i;
        });
      });
      await server.ready;
      const other = listen(js.urls[0], { subject: s, durable: true, concurrency: 2, ackWait: 1000 }, (w) => {
        w.respond(async (v) => { runs.set(v.i, (runs.get(v.i) || 0) + 1); return v.i; });
      });
      await other.ready;
      const ch = await connect(js.urls[0], { subject: s, durable: true });
      const long = ch.request({ i: 0, long: true }, { timeout: 30_000 });
      await until(() => runs.has(0), 10_000, 'the long request to start');
      const rest = await Promise.all(Array.from({ length: 40 }, (_, k) => ch.request({ i: k + 1 }, { timeout: 30_000 })));
      assert.strictEqual(await long, 0);
      assert.strictEqual(rest.length, 40);
      assert.ok(most <= 2, `at most 2 at once, saw ${most}`);
      // The long request outlived its ack wait three times over and still
      // ran once: its worker kept telling JetStream it was in progress.
      // (Its own worker still holding it is not enough: another worker,
      // idle, would have been given it after the ack wait.)
      assert.strictEqual(runs.get(0), 1);
      const st = [...server.channels][0].stats();
      assert.ok(st.progressAcks >= 2, `progress acks ${st.progressAcks}`);
      assert.strictEqual(st.redeliveries, 0);
      ch.close();
      server.close();
      other.close();
    });

    // A worker asks the queue for no more requests than it has free slots:
    // what it cannot run yet stays in the queue, for the next worker to come
    // (before, it pulled as many again, which sat unrun in its client until
    // a slot freed, and no other worker could have them).
    for (const natsClient of CLIENTS) {
      it(`a worker holds at most \`concurrency\` requests; the rest wait in the queue for other workers (${natsClient})`, { timeout: 60_000 }, async () => {
        const s = subject();
        const concurrency = 4;
        const total = 2 * concurrency;
        // A long ack wait: no request moves to another worker by timing out.
        const options = { subject: s, durable: true, concurrency, ackWait: 60_000, natsClient };
        const held = heldTogether(total, 20_000);
        try {
          const a = listen(js.urls[0], options, held.responder(0));
          await a.ready;
          const ch = await connect(js.urls[0], { subject: s, durable: true, natsClient });
          const replies = Promise.all(Array.from({ length: total }, (_, i) => ch.request({ i }, { timeout: 50_000 })));
          await until(() => held.running() === concurrency, 20_000, 'worker A to run its first requests');
          const b = listen(js.urls[0], options, held.responder(1));
          await b.ready;
          const together = await held.released;
          assert.deepStrictEqual(await replies, Array.from({ length: total }, (_, i) => i));
          assert.deepStrictEqual(held.answered.map((xs) => xs.length), [concurrency, concurrency],
            `requests answered by A and by B: A held more than it ran (all ${total} running at once: ${together})`);
          const [as, bs] = [a, b].map((w) => [...w.channels][0].stats());
          assert.strictEqual(as.redeliveries + bs.redeliveries, 0);
          ch.close();
          a.close();
          b.close();
        } finally {
          held.done();
        }
      });
    }
  });

  describe('durable NATS channels on a 3-server JetStream cluster', { skip, timeout: 180_000 }, () => {
    let js;
    before(async () => { js = await startJetStreamCluster(3); });
    after(async () => {
      await cleanup();
      if (js) await js.stop();
    });

    it('replicates the queue (R3); a killed worker\'s requests go to another worker, one reply each', { timeout: 90_000 }, async () => {
      const s = subject();
      const options = { subject: s, ackWait: 1000, concurrency: 64 };
      const a = spawnWorker(js.urls, { ...options, hang: true });
      await a.ready;
      const ch = await connect(js.urls[1], { subject: s, durable: true, servers: [js.urls[2]] });
      const info = await streamInfo(js.urls[0], ch.stream);
      assert.strictEqual(info.config.num_replicas, 3);
      // Worker A takes 20 requests it will never answer, and is killed.
      const pending = Array.from({ length: 20 }, (_, i) => ch.request({ i }, { timeout: 60_000 }));
      await until(() => a.taken.length === 20, 20_000, 'worker A to take 20 requests');
      await killChild(a.child, a.exited);
      const b = spawnWorker(js.urls.slice().reverse(), options);
      await b.ready;
      const replies = await Promise.all(pending);
      assert.deepStrictEqual(replies.map((r) => r.i), Array.from({ length: 20 }, (_, i) => i));
      assert.ok(replies.every((r) => r.pid === b.child.pid));
      const bs = await childStats(b);
      assert.strictEqual(bs.redeliveries, 20);
      assert.strictEqual(ch.stats().duplicatesSuppressed, 0);
      ch.close();
    });

    // The fault run's start: four workers, each on its own server, start at
    // once, and all four make the shared consumer. On nats-server 2.9 the
    // pulls some of them sent while it was being made were dropped, unanswered:
    // those workers got no request until their client noticed, 30 s later,
    // and the others took every request meanwhile. Each request here waits
    // until all run at once, which needs every worker to take its share.
    it('spreads requests over workers that started together', { timeout: 90_000 }, async () => {
      const s = subject();
      const concurrency = 4;
      const workers = 4;
      const total = workers * concurrency;
      const held = heldTogether(total, 20_000);
      try {
        const servers = Array.from({ length: workers }, (_, k) => listen(js.urls[k % 3],
          { subject: s, durable: true, concurrency, ackWait: 60_000, servers: js.urls }, held.responder(k)));
        await Promise.all(servers.map((w) => w.ready));
        const ch = await connect(js.urls[0], { subject: s, durable: true, servers: js.urls.slice(1) });
        const replies = await Promise.all(Array.from({ length: total }, (_, i) => ch.request({ i }, { timeout: 60_000 })));
        assert.deepStrictEqual(replies, Array.from({ length: total }, (_, i) => i));
        assert.deepStrictEqual(held.answered.map((xs) => xs.length), Array(workers).fill(concurrency),
          'requests answered by each worker');
        ch.close();
        for (const w of servers) w.close();
      } finally {
        held.done();
      }
    });

    // A worker stopped (SIGSTOP) while it holds a request sends no progress
    // acks: after the ack wait the request goes to worker B, which answers.
    // Resumed, A answers too; that second reply is dropped, by the stream
    // within its duplicate window, and by the caller after it.
    for (const where of ['stream', 'caller']) {
      it(`drops the second reply of a request answered twice (${where})`, { timeout: 90_000 }, async () => {
        const s = subject();
        // The caller comes first and makes the stream (with a short
        // duplicate window for the caller's case).
        const ch = await connect(js.urls[0], {
          subject: s, durable: true, ackWait: 500, duplicateWindow: where === 'stream' ? 120_000 : 100, servers: js.urls.slice(1),
        });
        const a = spawnWorker(js.urls, { subject: s, ackWait: 500, delay: 1500 });
        await a.ready;
        const reply = ch.request({ i: 7 }, { timeout: 30_000 });
        await until(() => a.taken.length === 1, 10_000, 'worker A to take the request');
        process.kill(a.child.pid, 'SIGSTOP');
        const b = spawnWorker(js.urls.slice(1), { subject: s, ackWait: 500 });
        await b.ready;
        const first = await reply;
        assert.strictEqual(first.pid, b.child.pid);
        await sleep(where === 'caller' ? 300 : 0);
        process.kill(a.child.pid, 'SIGCONT');
        if (where === 'stream') {
          // A's reply is a JetStream publish to a 3-server stream, retried
          // while its acknowledgement times out: on a loaded machine that
          // took longer than 10 s once, hence the longer deadline, and
          // what A counted is named if it still does not come. While A was
          // stopped, the server may also have redelivered the request into
          // A's own open pull (its other slots): A runs those copies too on
          // resuming, and each of their replies is a duplicate as well, so
          // A may count more than one. None of them reaches the caller.
          let last = null;
          await until(async () => (last = await childStats(a)).duplicatesSuppressed >= 1, 30_000,
            () => `A's reply to be dropped as a duplicate (A's counts: ${JSON.stringify(last)})`);
          assert.strictEqual(ch.stats().duplicatesSuppressed, 0, 'the stream, not the caller, dropped it');
        } else {
          await until(() => ch.stats().duplicatesSuppressed === 1, 10_000, 'the caller to drop the second reply');
        }
        assert.strictEqual((await childStats(b)).redeliveries, 1);
        ch.close();
      });
    }
  });
}
