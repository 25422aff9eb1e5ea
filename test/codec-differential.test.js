'use strict';
// Issue 29 item 2: whatever a getter does, what procwire's `advanced`
// encoder sends decodes to what Node's own IPC sends for the same call, and
// every getter runs as many times as under Node. A seeded differential run
// of 200,000 random values (test/helpers/codec-differential.js: getters
// that count their calls, change their container or an ancestor, replace
// themselves or throw; holes; proxies whose traps count; prototype swaps)
// against Node's serializer; then the same cases on real channels and side
// by side with child_process.fork.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const path = require('path');
const v8 = require('v8');
const procwire = require('..');
const { run } = require('./helpers/codec-differential');
const { namedPair } = require('./helpers/pair');
const { nextMessage, messageWithin } = require('./helpers/messages');

const VALUES = 200_000;
const CHUNK = 50_000;
const SEED = 29;

for (let from = 0; from < VALUES; from += CHUNK) {
  test(`random values ${from}-${from + CHUNK - 1} (seed ${SEED}): same decoded value, error and getter calls as Node`, { timeout: 120_000 }, () => {
    const { mismatches, first } = run(CHUNK, SEED + from);
    assert.strictEqual(mismatches, 0, `${mismatches} values differ; the first:\n${first.join('\n')}`);
  });
}

// The example: reading a[1] cuts the array to one element.
function shrinkingArray(counter) {
  const a = [1, 2, 3, 4];
  Object.defineProperty(a, 1, {
    enumerable: true,
    configurable: true,
    get() {
      counter.calls++;
      a.length = 1;
      return 'x';
    },
  });
  return a;
}

function throwingValue(counter, err) {
  return { before: [1, 2], get bad() { counter.calls++; throw err; }, after: 'z' };
}

test('the issue\'s example encodes as Node\'s serializer does, its getter run once', () => {
  const counter = { calls: 0 };
  const got = v8.deserialize(procwire.codec.advanced.encode(shrinkingArray(counter)).subarray(4));
  assert.strictEqual(counter.calls, 1);
  assert.strictEqual(got.length, 4);
  assert.deepStrictEqual(Object.keys(got), ['0', '1']);
  assert.deepStrictEqual([got[0], got[1]], [1, 'x']);
});

test('a throwing getter: encode() throws that very error, once, and the encoder goes on', () => {
  const counter = { calls: 0 };
  const err = new Error('from the getter');
  assert.throws(() => procwire.codec.advanced.encode(throwingValue(counter, err)), (e) => e === err);
  assert.strictEqual(counter.calls, 1);
  assert.deepStrictEqual(v8.deserialize(procwire.codec.advanced.encode({ ok: [1] }).subarray(4)), { ok: [1] });
});

test('on a channel: a throwing getter throws from send() once, a mutating one sends Node\'s value, and the channel goes on', { timeout: 30_000 }, async (t) => {
  const p = await namedPair({ serialization: 'advanced' });
  t.after(() => p.close());
  const received = [];
  p.serverSide.on('message', (m) => received.push(m));
  // Twice: the first send of a tick goes out at once, a later one of the
  // same tick is staged (another path through the encoder).
  for (let round = 0; round < 2; round++) {
    p.client.send({ first: round });
    const counter = { calls: 0 };
    const err = new Error(`thrown in round ${round}`);
    assert.throws(() => p.client.send(throwingValue(counter, err)), (e) => e === err);
    assert.strictEqual(counter.calls, 1);
    const shrinking = { calls: 0 };
    p.client.send({ a: shrinkingArray(shrinking) });
    assert.strictEqual(shrinking.calls, 1);
    const done = nextMessage(p.serverSide, (m) => m.last === round);
    p.client.send({ last: round });
    await done;
  }
  assert.strictEqual(received.length, 6);
  for (let round = 0; round < 2; round++) {
    const [first, shrunk, last] = received.slice(round * 3, round * 3 + 3);
    assert.deepStrictEqual(first, { first: round });
    assert.strictEqual(shrunk.a.length, 4);
    assert.deepStrictEqual(Object.keys(shrunk.a), ['0', '1']);
    assert.deepStrictEqual(last, { last: round });
  }
});

test('the fork() surface sends and throws what child_process.fork does', { timeout: 60_000 }, async (t) => {
  const fixture = path.join(__dirname, 'fixtures', 'fork-child.js');
  const seen = [];
  for (const forkFn of [childProcess.fork, procwire.fork]) {
    const child = forkFn(fixture, { serialization: 'advanced', stdio: 'ignore' });
    t.after(() => child.kill('SIGKILL'));
    const counter = { calls: 0 };
    const err = new Error('from the getter');
    let thrown;
    try {
      child.send({ op: 'echo', value: throwingValue(counter, err) });
      thrown = 'nothing';
    } catch (e) {
      thrown = e === err ? 'the getter\'s error' : `another error: ${e && e.message}`;
    }
    const shrinking = { calls: 0 };
    const echoed = messageWithin(child, 20_000, 'the echo');
    child.send({ op: 'echo', value: shrinkingArray(shrinking) });
    const { echo } = await echoed;
    seen.push({
      thrown, calls: counter.calls, shrinkingCalls: shrinking.calls,
      length: echo.length, keys: Object.keys(echo), values: [echo[0], echo[1]], connected: child.connected,
    });
  }
  assert.deepStrictEqual(seen[0], {
    thrown: 'the getter\'s error', calls: 1, shrinkingCalls: 1, length: 4, keys: ['0', '1'], values: [1, 'x'], connected: true,
  });
  assert.deepStrictEqual(seen[1], seen[0]);
});
