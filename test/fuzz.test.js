'use strict';
// A mutation fuzzer for everything that reads bytes from a peer: the native
// decoder, the framer, a live channel, and the authenticated hello. Seeds are
// real frames kept in fuzz/corpus/js/; mutations flip bits, splice, truncate,
// repeat, and rewrite length headers and host-object tags. Bounded in time
// (FUZZ_JS_SECONDS, default 8 s over all targets); the seed is printed, and
// PROCWIRE_FUZZ_SEED replays a run. Any crash kills this process and fails
// the test; every error must carry a procwire code.

const test = require('node:test');
const assert = require('node:assert');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { once } = require('events');
const procwire = require('..');
const { withTimeout } = require('./helpers/wait');
const { kWriter } = require('../lib/channel/symbols');

const SECONDS = Number(process.env.FUZZ_JS_SECONDS || 8);
const SEED = Number(process.env.PROCWIRE_FUZZ_SEED || (Date.now() % 2 ** 31));
const CORPUS = path.join(__dirname, '..', 'fuzz', 'corpus', 'js');
const seeds = fs.readdirSync(CORPUS).sort().map((f) => fs.readFileSync(path.join(CORPUS, f)));

// xorshift32: reproducible from the printed seed.
let state = SEED || 1;
function rand(n) {
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state % n;
}

const INTERESTING_LENGTHS = [0, 1, 2, 3, 0x7f, 0x80, 0xff, 0x7fffffff, 0x80000000, 0x80000001, 0xffffffff];

function mutate(input) {
  let b = Buffer.from(input);
  const rounds = 1 + rand(4);
  for (let r = 0; r < rounds; r++) {
    switch (rand(9)) {
      case 0: if (b.length) b[rand(b.length)] ^= 1 << rand(8); break;
      case 1: if (b.length) b[rand(b.length)] = rand(256); break;
      case 2: b = b.subarray(0, rand(b.length + 1)); break;
      case 3: { const at = rand(b.length + 1); b = Buffer.concat([b.subarray(0, at), crypto.randomBytes(1 + rand(8)), b.subarray(at)]); break; }
      case 4: { const other = seeds[rand(seeds.length)]; const at = rand(b.length + 1); b = Buffer.concat([b.subarray(0, at), other.subarray(rand(other.length + 1))]); break; }
      case 5: if (b.length >= 4) b.writeUInt32BE(INTERESTING_LENGTHS[rand(INTERESTING_LENGTHS.length)] >>> 0, 0); break;
      case 6: { const i = b.indexOf(0x5c); if (i >= 0 && i + 1 < b.length) b[i + 1] = rand(256); break; }  // host-object tag
      case 7: if (b.length) { const at = rand(b.length); b = Buffer.concat([b, b.subarray(at, at + 1 + rand(16))]); } break;
      default: if (b.length > 4) b[4 + rand(b.length - 4)] = [0x22, 0x63, 0x6f, 0x41, 0x61, 0x5c, 0x5e, 0xff, 0x00][rand(9)];
    }
  }
  return b;
}

function assertCoded(err) {
  assert.ok(err && typeof err.code === 'string' && err.code.startsWith('ERR_PROCWIRE_'), `uncoded error: ${err && err.stack}`);
}

const budget = (share) => Date.now() + SECONDS * 1000 * share;

test(`fuzz: native decode of mutated payloads (seed ${SEED})`, { timeout: 120_000 }, () => {
  const end = budget(0.3);
  let runs = 0;
  let accepted = 0;
  while (Date.now() < end) {
    for (let k = 0; k < 200; k++) {
      const frame = mutate(seeds[rand(seeds.length)]);
      const payload = frame.subarray(Math.min(4, frame.length));
      try {
        procwire.codec.advanced.decode(payload);
        accepted++;
      } catch (err) {
        assertCoded(err);
      }
      try {
        procwire.codec.json.decode(payload);
      } catch (err) {
        assertCoded(err);
      }
      runs++;
    }
  }
  process.stdout.write(`# decode: ${runs} mutated payloads, ${accepted} decoded, seed ${SEED}\n`);
  assert.ok(runs > 1000);
});

test(`fuzz: framer over mutated streams in random chunks (seed ${SEED})`, { timeout: 120_000 }, () => {
  const end = budget(0.25);
  let runs = 0;
  while (Date.now() < end) {
    const stream = Buffer.concat(Array.from({ length: 1 + rand(6) }, () => mutate(seeds[rand(seeds.length)])));
    for (const serialization of ['advanced', 'json']) {
      const errors = [];
      const framer = new procwire.Framer({ serialization, maxMessageSize: 1 << 20, onError: (e) => errors.push(e) });
      let pos = 0;
      let fatal = false;
      while (pos < stream.length && !fatal) {
        const n = 1 + rand(64);
        framer.push(stream.subarray(pos, pos + n));
        pos += n;
        fatal = errors.some((e) => e.code === 'ERR_PROCWIRE_MESSAGE_TOO_LARGE');
      }
      errors.forEach(assertCoded);
      assert.ok(framer.buffering <= (1 << 20) + 4, 'buffering stays under the limit');
      runs++;
    }
  }
  process.stdout.write(`# framer: ${runs} streams\n`);
  assert.ok(runs > 100);
});

test(`fuzz: a live channel fed mutated frames keeps serving (seed ${SEED})`, { timeout: 120_000 }, async () => {
  const end = budget(0.25);
  const name = `fz-${process.pid}-${crypto.randomBytes(3).toString('hex')}`;
  const server = procwire.listen(name, { auth: false, maxMessageSize: 1 << 20 });
  await server.ready;
  const codes = new Set();
  server.on('channel', (ch) => {
    ch.on('error', (e) => { assertCoded(e); codes.add(e.code); });
    ch.on('messageerror', (e) => { assertCoded(e); codes.add(e.code); });
    ch.on('message', (m) => { if (m && m.ping) ch.send({ pong: m.ping }); });
  });
  let batches = 0;
  // The clients still open when a wait or an assertion fails, closed in the
  // finally below.
  const clients = new Set();
  try {
    while (Date.now() < end) {
      const client = await procwire.connect(name, { auth: false });
      clients.add(client);
      const closed = new Promise((resolve) => client.once('close', resolve));
      client.on('error', () => {});
      const stream = Buffer.concat(Array.from({ length: 8 }, () => mutate(seeds[rand(seeds.length)])));
      client[kWriter].sendRaw(stream);
      // A ping after the garbage: answered if the stream is still in sync,
      // or the server closed this channel (framing error); either is fine.
      client.send({ ping: batches });
      const pong = new Promise((resolve) => client.on('message', (m) => { if (m && m.pong === batches) resolve('pong'); }));
      const outcome = await Promise.race([pong, closed.then(() => 'closed'), new Promise((r) => setTimeout(() => r('silent'), 300))]);
      // Garbage can leave a partial frame waiting for bytes: that is a
      // bounded wait, not a failure.
      assert.ok(['pong', 'closed', 'silent'].includes(outcome));
      client.destroy();
      clients.delete(client);
      batches++;
    }
    // The server still works for a clean client.
    const clean = await procwire.connect(name, { auth: false });
    clients.add(clean);
    clean.send({ ping: 'final' });
    const [m] = await withTimeout(once(clean, 'message'), 10_000, 'the final pong');
    assert.deepStrictEqual(m, { pong: 'final' });
    clean.destroy();
  } finally {
    for (const client of clients) client.destroy();
    server.close();
  }
  process.stdout.write(`# channel: ${batches} batches, codes seen: ${[...codes].join(' ')}\n`);
  assert.ok(batches >= 3, `only ${batches} batches ran`);
});

test(`fuzz: mutated hellos never authenticate (seed ${SEED})`, { timeout: 120_000 }, async () => {
  const end = budget(0.2);
  const name = `fh-${process.pid}-${crypto.randomBytes(3).toString('hex')}`;
  const server = procwire.listen(name, { helloTimeout: 300 });
  await server.ready;
  let accepted = 0;
  let rejected = 0;
  server.on('channel', () => { accepted++; });
  server.on('reject', (err) => { assertCoded(err); rejected++; });
  const helloSeeds = seeds.filter((s) => s.includes(Buffer.from('NODE_PROCWIRE')));
  let attempts = 0;
  try {
    while (Date.now() < end) {
      const client = await procwire.connect(name, { auth: false });
      client.on('error', () => {});
      const closed = new Promise((resolve) => client.once('close', resolve));
      for (let i = 0; i < 3; i++) client[kWriter].sendRaw(mutate(helloSeeds[rand(helloSeeds.length)]));
      await Promise.race([closed, new Promise((r) => setTimeout(r, 600))]);
      client.destroy();
      attempts++;
    }
    // The last attempts' rejections may still be on their way (a hello
    // timeout of 300 ms, a loaded machine): up to 10 s for them.
    for (let i = 0; i < 500 && rejected < attempts; i++) await new Promise((r) => setTimeout(r, 20));
    assert.strictEqual(accepted, 0, 'no mutated hello authenticated');
    assert.strictEqual(rejected, attempts, 'every attempt was refused with a coded error');
    // A real client still gets in.
    const good = await procwire.connect(name);
    good.destroy();
  } finally {
    server.close();
  }
  process.stdout.write(`# hello: ${attempts} mutated handshakes, all refused\n`);
});

test(`fuzz: the segment control protocol (acks, capabilities, announcements, descriptors) (seed ${SEED})`,
  { timeout: 120_000 }, async () => {
    if (!procwire.native) return;
    const end = budget(0.15);
    const fdsNow = () => fs.readdirSync('/proc/self/fd').length;
    const name = `fs-${process.pid}-${crypto.randomBytes(3).toString('hex')}`;
    const server = procwire.listen(name, { auth: false });
    await server.ready;
    const values = [0, 1, -1, 2 ** 53, 2 ** 64, NaN, Infinity, -Infinity, 0.5, '1', null, undefined, {}, [], true, 1e300];
    const pick = () => values[rand(values.length)];
    const baseline = fdsNow();
    const codes = new Set();
    let rounds = 0;
    try {
      while (Date.now() < end) {
        const accepted = once(server, 'channel');
        const client = await procwire.connect(name, { auth: false, outOfLine: 'always' });
        const [peer] = await accepted;
        client.on('error', () => {});
        peer.on('error', (err) => { assertCoded(err); codes.add(err.code); });
        peer.on('messageerror', (err) => { assertCoded(err); codes.add(err.code); });
        peer.on('message', () => {});
        const closed = new Promise((resolve) => peer.once('close', (reason, err) => {
          if (err) { assertCoded(err); codes.add(err.code); }
          resolve(reason);
        }));
        for (let i = 0; i < 4; i++) {
          switch (rand(5)) {
            case 0: client[kWriter].sendControl({ cmd: 'NODE_PROCWIRE_SEGACK', n: pick(), bytes: pick() }); break;
            case 1: client[kWriter].sendControl({ cmd: 'NODE_PROCWIRE_CAPS', v: pick(), segments: pick() }); break;
            case 2: {
              // An announcement [0xFE][count] with 0-3 descriptors that may
              // or may not be sealed memfds.
              const fds = [];
              const n = rand(4);
              for (let k = 0; k < n; k++) fds.push(fs.openSync('/dev/null', 'r'));
              const control = Buffer.from([0, 0, 0, 2, 0xfe, rand(256)]);
              if (rand(3) === 0) control.writeUInt32BE(rand(8), 0);
              client[kWriter].sendRaw(control, fds);
              for (const fd of fds) fs.closeSync(fd);
              break;
            }
            case 3: client.send({ b: Buffer.alloc(rand(2) ? 300 * 1024 : 10, 1) }); break;
            default: client[kWriter].sendRaw(mutate(seeds[rand(seeds.length)]));
          }
        }
        client.send({ last: true });
        await Promise.race([closed, new Promise((r) => setTimeout(r, 100))]);
        client.destroy();
        peer.destroy();
        await closed;
        rounds++;
      }
      // Every descriptor that came with the hostile frames was closed.
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(fdsNow() <= baseline + 2, `descriptors leaked: ${fdsNow()} open, ${baseline} before`);
    } finally {
      server.close();
    }
    process.stdout.write(`# segments: ${rounds} rounds, codes seen: ${[...codes].join(' ')}\n`);
    assert.ok(rounds >= 3, `only ${rounds} rounds ran`);
  });
