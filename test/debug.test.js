'use strict';
// NODE_DEBUG=procwire traces a channel's life on stderr (connect, the hello,
// capabilities, rings, close), and without it procwire writes nothing. A
// real server and client in a child process whose environment is the switch.

const test = require('node:test');
const assert = require('node:assert');
const path = require('path');
const { execFile } = require('child_process');

const root = path.join(__dirname, '..');
const PROGRAM = `
const procwire = require(${JSON.stringify(root)});
(async () => {
  const name = 'debug-test-' + process.pid;
  const server = procwire.listen(name, (ch) => ch.respond((v) => v));
  await server.ready;
  const ch = await procwire.connect(name);
  await ch.request(1);
  ch.close();
  server.close();
  await procwire.connect({ path: '/nonexistent/procwire.sock' }, { auth: false }).catch(() => {});
})();
`;

function run(env) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', PROGRAM], { env: { ...process.env, ...env }, timeout: 60_000, encoding: 'utf8' },
      (err, stdout, stderr) => (err ? reject(err) : resolve(stderr)));
  });
}

test('NODE_DEBUG=procwire traces connect, hello, capabilities, rings and close', { timeout: 90_000 }, async () => {
  const stderr = await run({ NODE_DEBUG: 'procwire' });
  for (const re of [/^PROCWIRE \d+: listen "debug-test-/m, /^PROCWIRE \d+: connect "debug-test-/m,
    /capabilities from peer: segments/, /hello done \(client\)/, /hello done \(server\)/, /rings starting/,
    /closed: local/, /connect \{"path":"\/nonexistent\/procwire.sock"\} failed: connect \/nonexistent/]) {
    assert.match(stderr, re);
  }
});

test('without NODE_DEBUG procwire writes nothing to stderr', { timeout: 90_000 }, async () => {
  const env = { NODE_DEBUG: '' };
  assert.strictEqual(await run(env), '');
});
