'use strict';
// A procwire child that only answers requests stays alive for them, and a
// request to a peer that never answers ends by itself (the default timeout).

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const procwire = require('..');

const root = path.join(__dirname, '..');

function tempScript(t, name, body) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-req-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, name);
  fs.writeFileSync(file, `const procwire = require(${JSON.stringify(root)});\n${body}\n`);
  return file;
}

function exited(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve([child.exitCode, child.signalCode]);
    else child.once('exit', (code, signal) => resolve([code, signal]));
  });
}

test('a child with only a responder stays alive, answers, and exits when the parent disconnects',
  { timeout: 30_000 }, async (t) => {
    const file = tempScript(t, 'worker.js', 'procwire.parent.respond(async ({ a, b }) => a + b);');
    const child = procwire.fork(file, { child: 'procwire' });
    t.after(() => child.kill('SIGKILL'));
    // Long enough for a child with nothing keeping it alive to have exited.
    await new Promise((r) => setTimeout(r, 500));
    assert.strictEqual(child.exitCode, null, 'the responder did not keep the child alive');
    assert.strictEqual(await child.request({ a: 2, b: 3 }), 5);
    child.disconnect();
    assert.deepStrictEqual(await exited(child), [0, null]);
  });

test('respond(null) lets the child exit again', { timeout: 30_000 }, async (t) => {
  const file = tempScript(t, 'worker.js',
    'procwire.parent.respond((v) => { setImmediate(() => procwire.parent.respond(null)); return v; });');
  const child = procwire.fork(file, { child: 'procwire' });
  t.after(() => child.kill('SIGKILL'));
  assert.strictEqual(await child.request('x'), 'x');
  assert.deepStrictEqual(await exited(child), [0, null]);
});

test('requests time out by default; per channel, per request, and 0 for none', { timeout: 30_000 }, async (t) => {
  // A responder that never settles: the parent's requests get no reply.
  const file = tempScript(t, 'silent.js', 'procwire.parent.respond(() => new Promise(() => {}));');
  const child = procwire.fork(file, { child: 'procwire', requestTimeout: 200 });
  t.after(() => child.kill('SIGKILL'));
  assert.strictEqual(child.channel.requestTimeout, 200);

  const started = Date.now();
  await assert.rejects(child.request(1), { code: 'ERR_PROCWIRE_REQUEST_TIMEOUT' });
  assert.ok(Date.now() - started >= 150, 'the channel timeout applied');
  await assert.rejects(child.request(2, { timeout: 50 }), { code: 'ERR_PROCWIRE_REQUEST_TIMEOUT' });
  assert.throws(() => child.request(2, { timeout: -1 }), { code: 'ERR_PROCWIRE_INVALID_ARG' });

  // timeout 0: still pending well past the channel's timeout, until the channel closes.
  let settled = false;
  const forever = child.request(3, { timeout: 0 }).finally(() => { settled = true; });
  await new Promise((r) => setTimeout(r, 500));
  assert.strictEqual(settled, false);
  child.kill('SIGKILL');
  await assert.rejects(forever, { code: 'ERR_PROCWIRE_CHANNEL_CLOSED' });

});

test('the default request timeout is 30 s', { timeout: 30_000 }, async (t) => {
  const file = tempScript(t, 'idle.js', 'procwire.parent.on("message", () => {});');
  const child = procwire.fork(file, { child: 'procwire' });
  t.after(() => child.kill('SIGKILL'));
  assert.strictEqual(child.channel.requestTimeout, 30_000);
  // fork() passes every channel option on (maxSegmentsInFlight was once dropped).
  const tuned = procwire.fork(file, { child: 'procwire', maxSegmentsInFlight: 3 });
  t.after(() => tuned.kill('SIGKILL'));
  assert.strictEqual(tuned.channel.maxSegmentsInFlight, 3);
  tuned.disconnect();
  await exited(tuned);
  child.disconnect();
  await exited(child);
});

test('a request sent right after connect() reaches the responder the channel handler registers',
  { timeout: 30_000 }, async (t) => {
    const server = procwire.listen(`req-race-${process.pid}`, (channel) => channel.respond((v) => v + 1));
    t.after(() => {
      server.close();
      for (const channel of server.channels) channel.destroy();
    });
    await server.ready;
    // The request often arrives in the same read as the client's proof, before
    // the server's 'channel' handler runs: it must wait for the responder.
    for (let i = 0; i < 20; i++) {
      const client = await procwire.connect(`req-race-${process.pid}`);
      try {
        assert.strictEqual(await client.request(i, { timeout: 5000 }), i + 1);
      } finally {
        client.close();
      }
    }
    // A channel that never registers one still answers NO_RESPONDER, one turn later.
    const bare = procwire.listen(`req-bare-${process.pid}`);
    t.after(() => {
      bare.close();
      for (const channel of bare.channels) channel.destroy();
    });
    await bare.ready;
    const client = await procwire.connect(`req-bare-${process.pid}`);
    t.after(() => client.close());
    await assert.rejects(client.request(1, { timeout: 5000 }), { code: 'ERR_PROCWIRE_NO_RESPONDER' });
  });
