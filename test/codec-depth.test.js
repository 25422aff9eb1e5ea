'use strict';
// A message nested too deeply for the serializer (issue 29): send() throws
// procwire's coded error, the RangeError as its cause, and the channel goes
// on. The fork() surface throws what Node's send() throws (checked side by
// side with child_process.fork). Real sockets and processes.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const path = require('path');
const procwire = require('..');
const { namedPair } = require('./helpers/pair');
const { nextMessage } = require('./helpers/messages');

const TIMEOUT = { timeout: 30000 };
const DEPTH = 20000;

function deepArray() {
  let v = 1;
  for (let i = 0; i < DEPTH; i++) v = [v];
  return v;
}

function deepObject() {
  const root = {};
  let o = root;
  for (let i = 0; i < DEPTH; i++) {
    o.a = {};
    o = o.a;
  }
  return root;
}

for (const serialization of ['advanced', 'json']) {
  test(`a ${DEPTH}-deep message fails send() with ERR_PROCWIRE_UNSERIALIZABLE (${serialization})`, TIMEOUT, async (t) => {
    const p = await namedPair({ serialization });
    t.after(() => p.close());
    for (const value of [deepArray(), deepObject()]) {
      assert.throws(() => p.client.send(value), (err) => {
        assert.strictEqual(err.code, 'ERR_PROCWIRE_UNSERIALIZABLE');
        assert.ok(err.cause instanceof RangeError, 'the cause is the RangeError');
        return true;
      });
    }
    const got = nextMessage(p.serverSide);
    p.client.send({ after: true });
    assert.deepStrictEqual(await got, { after: true });
  });
}

test('the fork() surface throws what Node throws for a too deep message', TIMEOUT, async (t) => {
  const fixture = path.join(__dirname, 'fixtures', 'preload-report.js');
  const thrown = [];
  for (const forkFn of [childProcess.fork, procwire.fork]) {
    const child = forkFn(fixture, { serialization: 'advanced', stdio: 'ignore' });
    t.after(() => child.kill('SIGKILL'));
    try {
      child.send(deepArray());
      thrown.push(null);
    } catch (err) {
      thrown.push({ name: err.name, message: err.message });
    }
    assert.strictEqual(child.connected, true);
  }
  assert.deepStrictEqual(thrown[1], thrown[0]);
});
