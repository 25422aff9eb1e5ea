'use strict';
// Issue 32, "big results": a worker result whose JSON text is longer than
// V8's maximum string length fails with a coded error within seconds, never
// a silent hang, and both ends and their channel go on. procwire's Channel
// and request API give ERR_PROCWIRE_UNSERIALIZABLE (the RangeError its
// cause); the fork() surface throws what Node's send() throws, checked side
// by side with child_process.fork. A peer that sends such a json frame to a
// receiver that allows its size gets it reported and skipped. Real children;
// each over-long text costs about 600 MB and 1-3 s while JSON.stringify
// tries; they run one at a time, and each one's garbage is collected before
// the next (no process holds more than one at a time).

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const path = require('path');
const { once } = require('events');
const procwire = require('..');
const { uniqueName } = require('./helpers/pair');
const { messageWithin } = require('./helpers/messages');
const { withTimeout, exitOf } = require('./helpers/wait');
const { overlong, tryToSend, collect } = require('./fixtures/big-result');

const FIXTURE = path.join(__dirname, 'fixtures', 'big-result.js');
const PEER = path.join(__dirname, 'fixtures', 'overlong-json-peer.js');
// Generous: on a loaded 2-core machine one attempt took 20 s.
const TIMEOUT = { timeout: 600_000 };
const WITHIN = 120_000;

function isUnserializable(err) {
  assert.strictEqual(err.code, 'ERR_PROCWIRE_UNSERIALIZABLE');
  assert.ok(err.cause instanceof RangeError, 'the cause is the RangeError');
  return true;
}

test('the codec API: an over-long json text is ERR_PROCWIRE_UNSERIALIZABLE', TIMEOUT, () => {
  assert.throws(() => procwire.codec.json.encode(overlong()), isUnserializable);
  collect();
});

test('a request whose result is over-long json rejects with a coded error; both ends go on', TIMEOUT, async (t) => {
  const worker = procwire.fork(FIXTURE, ['procwire'], { child: 'procwire' });
  t.after(() => worker.kill('SIGKILL'));
  const exited = exitOf(worker);
  await assert.rejects(withTimeout(worker.request('big', { timeout: WITHIN }), WITHIN, 'the big result'), (err) => {
    assert.strictEqual(err.code, 'ERR_PROCWIRE_REMOTE_ERROR');
    assert.strictEqual(err.remote.code, 'ERR_PROCWIRE_UNSERIALIZABLE');
    assert.match(err.remote.message, /Invalid string length/);
    return true;
  });
  assert.deepStrictEqual(await worker.request('a'), { echo: 'a' });
  // The worker's own send() of such a value throws the coded error.
  const reported = messageWithin(worker, WITHIN, "the worker's report", (m) => m && m.report);
  worker.send('send-big');
  const { report } = await reported;
  assert.match(report.message, /Invalid string length/);
  assert.deepStrictEqual({ ...report, message: undefined }, {
    name: 'UnserializableError', code: 'ERR_PROCWIRE_UNSERIALIZABLE', cause: 'RangeError', message: undefined,
  });
  // So does the parent's request with such an argument, and nothing of it
  // was queued.
  await assert.rejects(worker.request(overlong()), isUnserializable);
  collect();
  assert.deepStrictEqual(await worker.request('b'), { echo: 'b' });
  worker.disconnect();
  assert.deepStrictEqual(await withTimeout(exited, WITHIN, 'the worker to exit'), { code: 0, signal: null });
});

test('the fork() surface throws what Node throws for an over-long json message, both ways', TIMEOUT, async (t) => {
  const seen = [];
  for (const forkFn of [childProcess.fork, procwire.fork]) {
    const child = forkFn(FIXTURE, { serialization: 'json' });
    t.after(() => child.kill('SIGKILL'));
    const exited = exitOf(child);
    const parentSend = tryToSend((v) => child.send(v));
    assert.strictEqual(child.connected, true);
    child.send('before');
    const [reply] = await withTimeout(once(child, 'message'), WITHIN, 'an answer after the failed send');
    child.send('send-big');
    const [report] = await withTimeout(once(child, 'message'), WITHIN, "the child's report");
    child.send('after');
    const [after] = await withTimeout(once(child, 'message'), WITHIN, 'a message after');
    child.send('bye');
    const exit = await withTimeout(exited, WITHIN, 'the child to exit');
    seen.push({ parentSend, reply, report, after, exit });
  }
  // Node's own outcome, for the record: send() throws V8's RangeError on
  // either side, and the channel goes on.
  assert.strictEqual(seen[0].parentSend.name, 'RangeError');
  assert.deepStrictEqual(seen[1], seen[0]);
});

test('a received json frame over V8\'s maximum string length is reported and skipped', TIMEOUT, async (t) => {
  const name = uniqueName('big');
  const server = procwire.listen(name, { serialization: 'json', rings: 'never', maxMessageSize: 1 << 30 });
  t.after(() => server.close());
  await server.ready;
  const accepted = once(server, 'channel');
  const peer = childProcess.fork(PEER, [name], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  t.after(() => peer.kill('SIGKILL'));
  const exited = exitOf(peer);
  const [channel] = await withTimeout(accepted, WITHIN, 'the peer to connect');
  const failed = withTimeout(once(channel, 'error'), WITHIN, 'the decode error');
  const after = messageWithin(channel, WITHIN, 'the message after the long frame');
  const [err] = await failed;
  assert.strictEqual(err.code, 'ERR_PROCWIRE_DECODE');
  assert.match(err.message, /maximum string length/);
  assert.deepStrictEqual(await after, { after: true });
  channel.send('bye');
  assert.deepStrictEqual(await withTimeout(exited, WITHIN, 'the peer to exit'), { code: 0, signal: null });
});
