'use strict';
// procwire.fork as a drop-in for child_process.fork: each test runs the same
// steps against child_process.fork itself, procwire.fork with a plain Node
// child, and procwire.fork with a procwire child, and asserts the three
// observe the same thing (and what Node documents, where it is a value).

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const crypto = require('crypto');
const dgram = require('dgram');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const url = require('url');
const procwire = require('..');
const { binding } = require('../lib/native');
const wait = require('./helpers/wait');
const { kWriter } = require('../lib/channel/symbols');

const FIXTURE = path.join(__dirname, 'fixtures', 'fork-child.js');
const CLUSTER_FIXTURE = path.join(__dirname, 'fixtures', 'cluster-http.js');
const NODE_MAJOR = Number(process.versions.node.split('.')[0]);
const STEP_TIMEOUT = 10_000;

const VARIANTS = [
  { name: 'child_process.fork', fork: (file, args, options) => childProcess.fork(file, args, options) },
  { name: 'procwire.fork/node', fork: (file, args, options) => procwire.fork(file, args, { ...options, child: 'node' }) },
  { name: 'procwire.fork/procwire', fork: (file, args, options) => procwire.fork(file, args, { ...options, child: 'procwire' }) },
  { name: 'procwire.fork/native', fork: (file, args, options) => procwire.fork(file, args, { ...options, child: 'native' }) },
];

// Re-run by the test 'a message listener that throws...': forks the fixture
// with one variant, throws from the listener at two messages of a burst
// the child sends in one tick, and prints what it saw.
if (process.argv[2] === 'throwing-listener') {
  const variant = VARIANTS.find((v) => v.name === process.argv[3]);
  const child = variant.fork(FIXTURE, [], {});
  const got = [];
  const errors = [];
  process.on('uncaughtException', (err) => errors.push([err.message, got.length]));
  child.on('message', (m) => {
    got.push(m.i);
    if (m.i === 2 || m.i === 5) throw new Error(`listener threw at ${m.i}`);
    if (got.length === 8) {
      console.log(JSON.stringify({ got, errors }));
      child.kill();
    }
  });
  child.send({ op: 'many', n: 8 });
  setTimeout(() => {
    console.log(JSON.stringify({ got, errors, timedOut: true }));
    child.kill();
    process.exit(1);
  }, STEP_TIMEOUT).unref();
  return;
}

function describeError(err) {
  return err ? { name: err.name, code: err.code, message: err.message } : null;
}

function thrown(fn) {
  try {
    const result = fn();
    if (result instanceof childProcess.ChildProcess) result.kill('SIGKILL');
  } catch (err) {
    return describeError(err);
  }
  return null;
}

// Every step of these tests is bounded by STEP_TIMEOUT.
function withTimeout(promise, what) {
  return wait.withTimeout(promise, STEP_TIMEOUT, what);
}

function until(cond, what) {
  return wait.until(cond, STEP_TIMEOUT, what);
}

// The next 'message' (message, handle) that satisfies `accept`.
function nextMessage(emitter, accept = () => true, event = 'message') {
  return withTimeout(new Promise((resolve) => {
    const on = (message, handle) => {
      if (!accept(message)) return;
      emitter.removeListener(event, on);
      resolve({ message, handle });
    };
    emitter.on(event, on);
  }), event);
}

function once(emitter, event) {
  return withTimeout(new Promise((resolve) => emitter.once(event, (...args) => resolve(args))), event);
}

async function stop(child) {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL');
    await once(child, 'exit');
  }
}

// The variants whose child runs an unmodified Node script (process.send,
// process.on('message')); with child: 'procwire' the child runs procwire's
// API instead, so tests of a plain child's behaviour compare these.
const PLAIN_CHILD_VARIANTS = VARIANTS.filter((variant) => !variant.name.endsWith('/procwire'));

// Runs `observe(variant)` for every variant (child_process.fork first) and
// asserts equal observations.
async function sideBySide(t, observe, variants = VARIANTS) {
  const seen = [];
  for (const variant of variants) seen.push([variant.name, await observe(variant)]);
  for (const [name, observation] of seen.slice(1)) {
    assert.deepStrictEqual(observation, seen[0][1], `${name} differs from ${seen[0][0]}`);
  }
  return seen[0][1];
}

function readAll(socket) {
  return withTimeout(new Promise((resolve, reject) => {
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (d) => { text += d; });
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  }), 'socket data');
}

// A script for a child, written to a temporary directory that is removed
// after the test: `lines` joined by newlines.
function childScript(t, prefix, name, lines) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, name);
  fs.writeFileSync(file, lines.join('\n'));
  return file;
}

// Node emits every message on a tick of its own; a listener that throws
// leaves the messages read with it to be emitted after 'uncaughtException',
// none lost or reordered.
test('a message listener that throws: the error is uncaught, the messages read with it still arrive in order', { timeout: 60_000 }, async (t) => {
  await sideBySide(t, async (variant) => {
    const out = childProcess.execFileSync(process.execPath, [__filename, 'throwing-listener', variant.name],
      { encoding: 'utf8', timeout: 2 * STEP_TIMEOUT });
    const seen = JSON.parse(out.trim().split('\n').pop());
    assert.deepStrictEqual(seen.got, [0, 1, 2, 3, 4, 5, 6, 7], variant.name);
    return seen;
  });
});

test('argument errors: same codes, classes and messages as child_process.fork', () => {
  const cases = [
    [1],
    [FIXTURE, 1],
    [FIXTURE, [], 'not an object'],
    [FIXTURE, [], []],
    [FIXTURE, { stdio: 'bogus' }],
    [FIXTURE, { stdio: ['pipe', 'pipe', 'pipe'] }],
    [FIXTURE, { stdio: ['pipe', 'pipe', 'pipe', 'ipc', 'ipc'] }],
    [FIXTURE, { serialization: 'xml' }],
    ['a\u0000b'],
  ];
  for (const args of cases) {
    const node = thrown(() => childProcess.fork(...args));
    assert.ok(node !== null, `child_process.fork should throw for ${JSON.stringify(args)}`);
    assert.deepStrictEqual(thrown(() => procwire.fork(...args)), node);
  }
});

// Node copies the options' own keys only ({ __proto__: null, ...options }):
// a key someone put on Object.prototype is no option of any fork.
test('keys on Object.prototype are not options (execPath, execArgv, stdio, silent, serialization, child)', { timeout: 60_000 }, async (t) => {
  const polluted = {
    execPath: '/not/existing/path', execArgv: ['--no-such-flag'], stdio: 'bogus', silent: true,
    serialization: 'bogus', child: 'bogus',
  };
  await sideBySide(t, async (variant) => {
    for (const [key, value] of Object.entries(polluted)) Object.prototype[key] = value;
    let child;
    try {
      child = variant.fork(FIXTURE, [], {});
    } finally {
      for (const key of Object.keys(polluted)) delete Object.prototype[key];
    }
    try {
      child.send({ op: 'info' });
      const { execArgv, serialization } = (await nextMessage(child)).message;
      return { stdout: child.stdout, execArgv, serialization: serialization === undefined ? 'json' : serialization };
    } finally {
      await stop(child);
    }
  });
});

// Node writes a message within send(): once send() returned, a signal cannot
// overtake it, and its callback reports it sent.
test('send() then kill(): the message counts as sent, as in Node', { timeout: 60_000 }, async (t) => {
  await sideBySide(t, async (variant) => {
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const child = variant.fork(FIXTURE, [], {});
      const sent = withTimeout(new Promise((resolve) => {
        child.send({ op: 'echo', value: 1 }, (err) => resolve(describeError(err)));
      }), 'the first callback');
      const second = withTimeout(new Promise((resolve) => {
        child.send({ op: 'echo', value: 2 }, (err) => resolve(describeError(err)));
      }), 'the second callback');
      child.kill('SIGKILL');
      // The rest of this tick takes a while (the child is dead before it
      // ends): what send() left for later would find the peer gone.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
      seen.push([await sent, await second]);
      await once(child, 'exit');
    }
    return seen;
  });
});

test('fork(path, null, options) and file: URLs with escapes work as in child_process', { timeout: 30_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire fork %20 '));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'child #1.js');
  fs.writeFileSync(file, "process.on('message', (m) => { process.send({ back: m }); process.disconnect(); });\n");
  const fileUrl = url.pathToFileURL(file);
  const seen = await sideBySide(t, async (variant) => {
    const child = variant.fork(fileUrl, null, { stdio: 'inherit' });
    try {
      child.send(1);
      return (await nextMessage(child)).message;
    } finally {
      await stop(child);
    }
  }, PLAIN_CHILD_VARIANTS);
  assert.deepStrictEqual(seen, { back: 1 });
});

test('the ChildProcess surface: send, internalMessage, channel, disconnect, errors', { timeout: 60_000 }, async (t) => {
  const observed = await sideBySide(t, async (variant) => {
    const child = variant.fork(FIXTURE, [], {});
    const obs = {};
    try {
      obs.connected = child.connected;
      obs.fd = typeof child.channel.fd;
      obs.refUnref = [typeof child.channel.ref, typeof child.channel.unref];
      obs.hasLegacyAlias = '_channel' in child;
      obs.handleQueue = child._handleQueue;
      let callbackErr;
      const sent = new Promise((resolve) => {
        obs.sendReturn = child.send({ op: 'echo', value: 1 }, (err) => { callbackErr = err; resolve(); });
      });
      obs.callbackSync = callbackErr;
      await sent;
      obs.callbackErr = callbackErr;
      obs.echo = (await nextMessage(child)).message;
      // The default serialization is json, as Node's: functions vanish, a
      // Map becomes {}, nothing throws.
      child.send({ op: 'echo', value: { a: 1, f() {}, m: new Map([[1, 2]]) } });
      obs.jsonEcho = (await nextMessage(child)).message;
      obs.errors = {
        nullOptions: thrown(() => child.send({}, null, null)),
        // workerpool 3 passes an array here: Node refuses it.
        arrayOptions: thrown(() => child.send({}, 0, [])),
        numberOptions: thrown(() => child.send({}, undefined, 5)),
        missing: thrown(() => child.send(undefined)),
        symbol: thrown(() => child.send(Symbol('s'))),
        badHandle: thrown(() => child.send({}, { not: 'a handle' })),
      };
      // Internal messages (cmd NODE_*) go to 'internalMessage' only, in order.
      const events = [];
      const onInternal = (m) => events.push(['internalMessage', m]);
      const onMessage = (m) => events.push(['message', m]);
      child.on('internalMessage', onInternal);
      child.on('message', onMessage);
      child.send({ op: 'internal', value: 7 });
      await nextMessage(child, (m) => m.after === true);
      child.removeListener('internalMessage', onInternal);
      child.removeListener('message', onMessage);
      obs.internalEvents = events;

      const disconnected = once(child, 'disconnect');
      const exited = once(child, 'exit');
      const closed = once(child, 'close');
      closed.catch(() => {});
      child.disconnect();
      obs.afterDisconnect = { connected: child.connected, channel: child.channel };
      await disconnected;
      const secondError = once(child, 'error');
      child.disconnect();
      obs.secondDisconnect = describeError((await secondError)[0]);
      obs.sendAfter = await new Promise((resolve) => {
        obs.sendAfterReturn = child.send({ op: 'echo' }, (err) => resolve(describeError(err)));
      });
      const sendError = once(child, 'error');
      child.send({ op: 'echo' });
      obs.sendAfterNoCallback = describeError((await sendError)[0]);
      obs.exit = (await exited)[0];
      // Node never emits 'close' after the parent's own disconnect() (the
      // channel is not counted as closed then): neither may procwire.
      obs.closeAfterOwnDisconnect = await Promise.race([
        closed.then(() => true, () => false), new Promise((resolve) => setTimeout(resolve, 300, false))]);
      obs.channelAtExit = child.channel;
      return obs;
    } finally {
      await stop(child);
    }
  });
  assert.strictEqual(observed.sendReturn, true);
  assert.strictEqual(observed.callbackErr, null);
  assert.strictEqual(observed.hasLegacyAlias, NODE_MAJOR < 26);
  assert.deepStrictEqual(observed.jsonEcho, { echo: { a: 1, m: {} } });
  assert.strictEqual(observed.errors.nullOptions.code, 'ERR_INVALID_ARG_TYPE');
  assert.strictEqual(observed.errors.arrayOptions.code, 'ERR_INVALID_ARG_TYPE');
  assert.strictEqual(observed.errors.missing.code, 'ERR_MISSING_ARGS');
  assert.strictEqual(observed.errors.badHandle.code, 'ERR_INVALID_HANDLE_TYPE');
  assert.deepStrictEqual(observed.internalEvents.map((e) => e[0]), ['internalMessage', 'message']);
  assert.strictEqual(observed.secondDisconnect.code, 'ERR_IPC_DISCONNECTED');
  assert.strictEqual(observed.sendAfter.code, 'ERR_IPC_CHANNEL_CLOSED');
  assert.strictEqual(observed.sendAfterNoCallback.code, 'ERR_IPC_CHANNEL_CLOSED');
});

test("stdio: 'ipc' keeps its position; stdio arrays, strings and silent as Node", { timeout: 60_000 }, async (t) => {
  await sideBySide(t, async (variant) => {
    const obs = {};
    const a = variant.fork(FIXTURE, [], { stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'ipc'] });
    try {
      obs.a = a.stdio.map((s) => (s === null ? null : 'stream'));
      a.send({ op: 'info' });
      const info = (await nextMessage(a)).message;
      obs.aFd = info.channelFd;
      obs.nodeOptions = info.nodeOptions === undefined ? 'unset' : info.nodeOptions;
      obs.channelEnv = info.channelEnv;
    } finally {
      await stop(a);
    }
    const b = variant.fork(FIXTURE, [], { stdio: ['ipc', 'pipe', 'pipe'] });
    try {
      obs.b = b.stdio.map((s) => (s === null ? null : 'stream'));
      obs.bStdin = b.stdin;
      const stderr = new Promise((resolve) => {
        let text = '';
        b.stderr.setEncoding('utf8');
        b.stderr.on('data', (d) => { text += d; if (text.includes('\n')) resolve(text); });
      });
      b.send({ op: 'info' });
      obs.bFd = (await nextMessage(b)).message.channelFd;
      b.send({ op: 'stderr' });
      obs.bStderr = await withTimeout(stderr, 'stderr');
    } finally {
      await stop(b);
    }
    const c = variant.fork(FIXTURE, [], { silent: true });
    try {
      obs.silent = c.stdio.map((s) => (s === null ? null : 'stream'));
    } finally {
      await stop(c);
    }
    return obs;
  });
});

test('execArgv: -e is not passed on (no fork bomb); shell is forced off', { timeout: 60_000 }, async (t) => {
  const script = `
    const mode = process.argv[1];
    const procwire = require(${JSON.stringify(path.join(__dirname, '..'))});
    const fork = mode === 'node-fork' ? require('child_process').fork : procwire.fork;
    const options = { shell: true, ...(mode === 'node-fork' ? {} : { child: mode }) };
    const child = fork(${JSON.stringify(FIXTURE)}, ['$HOME', 'a b', ';echo x'], options);
    child.on('message', (m) => { console.log(JSON.stringify(m)); child.kill(); });
    child.send({ op: 'info' });
  `;
  await sideBySide(t, async (variant) => {
    const mode = variant.name === 'child_process.fork' ? 'node-fork' : variant.name.split('/')[1];
    const out = childProcess.execFileSync(process.execPath, ['--no-warnings', '-e', script, mode],
      { timeout: STEP_TIMEOUT, encoding: 'utf8' });
    const info = JSON.parse(out.trim());
    assert.ok(!info.execArgv.includes('-e'), 'the eval flag must not reach the child');
    return { argv: info.argv, execArgv: info.execArgv };
  });
});

test('handles from the parent: net.Socket, net.Server, dgram.Socket; later sends wait for the ACK', { timeout: 60_000 }, async (t) => {
  await sideBySide(t, async (variant) => {
    const obs = {};
    const child = variant.fork(FIXTURE, [], { serialization: 'advanced' });
    const cleanups = [];
    try {
      // A connection accepted here, answered by the child.
      const server = net.createServer();
      cleanups.push(() => server.close());
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      const accepted = once(server, 'connection');
      const client = net.connect(server.address().port, '127.0.0.1');
      cleanups.push(() => client.destroy());
      const [socket] = await accepted;
      const replies = [];
      const collect = (m) => replies.push(m);
      child.on('message', collect);
      let sentSocketClosed = false;
      socket.on('close', () => { sentSocketClosed = true; });
      child.send({ text: 'hi' }, socket);
      // The socket object let go of the connection: it is not destroyed,
      // and its server no longer counts it here.
      obs.sentSocket = { destroyed: socket.destroyed, serverConnections: server._connections };
      // Queued behind the handle until the child acknowledges it.
      obs.queuedWhilePending = Array.isArray(child._handleQueue);
      for (let i = 0; i < 5; i++) child.send({ op: 'echo', value: i });
      obs.clientRead = (await readAll(client)).replace(String(child.pid), 'PID');
      await until(() => replies.length >= 6, 'replies');
      child.removeListener('message', collect);
      obs.order = replies;
      obs.queueAfterAck = child._handleQueue;
      obs.sentSocketClosed = sentSocketClosed;

      // A listening server: the child accepts on it once ours is closed.
      const shared = net.createServer(() => assert.fail('the parent closed its copy'));
      cleanups.push(() => shared.close());
      await new Promise((resolve) => shared.listen(0, '127.0.0.1', resolve));
      const sharedPort = shared.address().port;
      child.send({ what: 'server' }, shared);
      obs.serverGot = (await nextMessage(child, (m) => m.kind !== undefined)).message;
      shared.close();
      const sharedClient = net.connect(sharedPort, '127.0.0.1');
      cleanups.push(() => sharedClient.destroy());
      obs.serverRead = (await readAll(sharedClient)).replace(String(child.pid), 'PID');

      // A bound UDP socket.
      const udp = dgram.createSocket('udp4');
      // Closed below once sent; closing it twice would throw.
      let udpClosed = false;
      cleanups.push(() => { if (!udpClosed) udp.close(); });
      await new Promise((resolve) => udp.bind(0, '127.0.0.1', resolve));
      const udpPort = udp.address().port;
      child.send({ what: 'udp' }, udp);
      obs.udpGot = (await nextMessage(child, (m) => m.kind !== undefined)).message;
      udp.close();
      udpClosed = true;
      const probe = dgram.createSocket('udp4');
      cleanups.push(() => probe.close());
      const answer = once(probe, 'message');
      probe.send('ping', udpPort, '127.0.0.1');
      obs.udpAnswer = String((await answer)[0]);
      return obs;
    } finally {
      for (const c of cleanups) c();
      await stop(child);
    }
  });
});

test('handles from the child: a connection and a listening server reach the parent', { timeout: 60_000 }, async (t) => {
  await sideBySide(t, async (variant) => {
    const obs = {};
    const child = variant.fork(FIXTURE, [], {});
    // It answers only when spoken to, so no byte is read by the sending end
    // before the handle changes hands.
    const server = net.createServer((s) => s.once('data', (d) => s.end(`hello ${d}`)));
    // The handles received from the child, and a connection to the server
    // among them, closed in the finally whatever step failed.
    const cleanups = [];
    try {
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      child.send({ op: 'sendSocket', port: server.address().port });
      const got = await nextMessage(child);
      if (got.handle instanceof net.Socket) cleanups.push(() => got.handle.destroy());
      obs.socketMessage = got.message;
      obs.socketIsSocket = got.handle instanceof net.Socket;
      got.handle.write('parent');
      obs.socketRead = await readAll(got.handle);

      // Both listeners before the request: the two answers may come in one read.
      const serverMessage = nextMessage(child, (m) => m.kind === 'server from child');
      const closedInChild = nextMessage(child, (m) => m.kind === 'closed in child');
      child.send({ op: 'sendServer' });
      const gotServer = await serverMessage;
      obs.serverIsServer = gotServer.handle instanceof net.Server;
      if (obs.serverIsServer) cleanups.push(() => gotServer.handle.close());
      gotServer.handle.on('connection', (s) => s.end('the parent took it over'));
      // The child closes its copy once sent; ours keeps listening. Until the
      // child's is closed, the child may accept the probe below itself.
      await closedInChild;
      const probe = net.connect(gotServer.message.port, '127.0.0.1');
      cleanups.push(() => probe.destroy());
      obs.serverRead = await readAll(probe);
      gotServer.handle.close();
      return obs;
    } finally {
      for (const c of cleanups) c();
      server.close();
      await stop(child);
    }
  });
});

test("a server's connections passed to the child still count: getConnections() and close() ask it", { timeout: 60_000 }, async (t) => {
  await sideBySide(t, async (variant) => {
    const child = variant.fork(FIXTURE, [], {});
    const server = net.createServer((socket) => child.send({ hold: true }, socket));
    const clients = [];
    try {
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      const got = [];
      const both = nextMessage(child, (m) => got.push(m) === 2);
      for (let i = 0; i < 2; i++) clients.push(net.connect(server.address().port, '127.0.0.1'));
      await both;
      const count = await withTimeout(new Promise((resolve, reject) =>
        server.getConnections((err, n) => (err ? reject(err) : resolve(n)))), 'getConnections');
      const closed = withTimeout(new Promise((resolve) => server.close(() => resolve(true))), 'server close');
      for (const c of clients) c.destroy();
      return { got, count, closed: await closed };
    } finally {
      for (const c of clients) c.destroy();
      await stop(child);
    }
  });
});

test('keepOpen: the sender keeps using a socket it passed', { timeout: 60_000 }, async (t) => {
  await sideBySide(t, async (variant) => {
    const child = variant.fork(FIXTURE, [], {});
    const server = net.createServer();
    let client = null;
    let socket = null;
    try {
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      const accepted = once(server, 'connection');
      client = net.connect(server.address().port, '127.0.0.1');
      [socket] = await accepted;
      const text = readAll(client);
      // The child holds its copy open without writing.
      child.send({ hold: true }, socket, { keepOpen: true });
      const got = (await nextMessage(child)).message;
      const stillOpen = !socket.destroyed && socket.writable;
      socket.end('still the parent');
      return { got, stillOpen, read: await text };
    } finally {
      if (client !== null) client.destroy();
      if (socket !== null) socket.destroy();
      server.close();
      await stop(child);
    }
  });
});

// Node's fork frees an HTTP connection's parser and detaches its response
// when it passes the socket on (without keepOpen), so neither keeps it here.
test('an HTTP connection passed to the child lets go of its parser and response', { timeout: 60_000 }, async (t) => {
  const http = require('http');
  await sideBySide(t, async (variant) => {
    const child = variant.fork(FIXTURE, [], {});
    const server = http.createServer();
    let client = null;
    try {
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      const request = once(server, 'request');
      client = net.connect(server.address().port, '127.0.0.1');
      const text = readAll(client);
      client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      const [, res] = await request;
      const socket = res.socket;
      const before = { parser: socket.parser !== null, httpMessage: socket._httpMessage === res };
      child.send({ text: 'hi' }, socket);
      const { message } = await nextMessage(child);
      // The child answers on the connection, not HTTP: it owns it now.
      const answered = (await text).startsWith('child ');
      return { before, after: { parser: socket.parser, httpMessage: socket._httpMessage }, kind: message.kind, answered };
    } finally {
      if (client !== null) client.destroy();
      server.close();
      await stop(child);
    }
  }, PLAIN_CHILD_VARIANTS);
});

test('NODE_HANDLE_NACK: the handle is sent again, 3 times at most, then a warning; queued messages follow', { timeout: 30_000 }, async (t) => {
  const name = `fork-nack-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  const server = procwire.listen(name, { auth: false });
  t.after(() => server.close());
  await server.ready;
  const accepted = once(server, 'channel');
  // A raw peer that speaks Node's protocol by hand and refuses every handle.
  const raw = net.connect(server.address().path);
  t.after(() => raw.destroy());
  const [channel] = await accepted;
  const framer = new procwire.Framer({ serialization: 'advanced' });
  const handleFrames = [];
  const after = new Promise((resolve) => {
    raw.on('data', (chunk) => {
      for (const m of framer.push(chunk)) {
        if (m && m.cmd === 'NODE_HANDLE') {
          handleFrames.push(m.msg);
          raw.write(procwire.codec.advanced.encode({ cmd: 'NODE_HANDLE_NACK' }));
        } else if (m && m.after) {
          resolve(m);
        }
      }
    });
  });
  const warned = new Promise((resolve) => {
    const on = (w) => {
      if (w.name !== 'SentHandleNotReceivedWarning') return;
      process.removeListener('warning', on);
      resolve(w.message);
    };
    process.on('warning', on);
  });
  const tcp = net.createServer();
  t.after(() => tcp.close());
  await new Promise((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  channel.send({ n: 1 }, tcp);
  channel.send({ after: true });
  assert.deepStrictEqual(await withTimeout(after, 'the queued message'), { after: true });
  assert.deepStrictEqual(handleFrames, [{ n: 1 }, { n: 1 }, { n: 1 }, { n: 1 }]);
  assert.strictEqual(await withTimeout(warned, 'the warning'), 'Handle did not reach the receiving process correctly');
});

test('a NODE_HANDLE message that arrives without its descriptor is answered with NODE_HANDLE_NACK', { timeout: 30_000 }, async (t) => {
  const name = `fork-nodesc-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  const server = procwire.listen(name, { auth: false });
  t.after(() => server.close());
  await server.ready;
  const accepted = once(server, 'channel');
  const raw = net.connect(server.address().path);
  t.after(() => raw.destroy());
  const [channel] = await accepted;
  const messages = [];
  channel.on('message', (m, handle) => messages.push([m, handle]));
  const framer = new procwire.Framer({ serialization: 'advanced' });
  const nack = new Promise((resolve) => {
    raw.on('data', (chunk) => {
      for (const m of framer.push(chunk)) if (m && m.cmd === 'NODE_HANDLE_NACK') resolve(m);
    });
  });
  raw.write(procwire.codec.advanced.encode({ cmd: 'NODE_HANDLE', type: 'net.Socket', msg: { x: 1 } }));
  raw.write(procwire.codec.advanced.encode({ after: true }));
  assert.deepStrictEqual(await withTimeout(nack, 'the NACK'), { cmd: 'NODE_HANDLE_NACK' });
  await until(() => messages.length > 0, 'the next message');
  // The message itself is not delivered without its handle; the stream goes on.
  assert.deepStrictEqual(messages, [[{ after: true }, undefined]]);
});

// A TCP connection on loopback, closed when test `t` ends: the accepted
// end (`socket`, to send as a handle) and the connecting end (`remote`).
async function loopbackConnection(t) {
  const tcpServer = net.createServer();
  t.after(() => tcpServer.close());
  await new Promise((resolve) => tcpServer.listen(0, '127.0.0.1', resolve));
  return async () => {
    const accepted = once(tcpServer, 'connection');
    const remote = net.connect(tcpServer.address().port, '127.0.0.1');
    t.after(() => remote.destroy());
    const [socket] = await accepted;
    return { socket, remote };
  };
}

test('a socket sent on a channel that has closed is let go of: the callback gets the error and the connection ends', { timeout: 30_000 }, async (t) => {
  const name = `fork-test-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  const server = procwire.listen(name);
  t.after(() => server.close());
  await server.ready;
  const client = await procwire.connect(name);
  client.on('error', () => {});
  const { socket, remote } = await (await loopbackConnection(t))();
  const remoteEnded = once(remote, 'end');
  client.destroy();
  const sendError = new Promise((resolve) => client.send({ here: 'a socket' }, socket, resolve));
  assert.strictEqual((await sendError).code, 'ERR_PROCWIRE_CHANNEL_CLOSED');
  // The socket object gave its handle up at send(), so only procwire can
  // close the connection: the other end sees it end.
  await Promise.race([remoteEnded, new Promise((resolve, reject) => {
    setTimeout(() => reject(new Error('the connection was left open')), 5000).unref();
  })]);
});

test('a getter that destroys the channel while its message is encoded: the callback gets the error, a socket sent with it is let go of', { timeout: 30_000 }, async (t) => {
  const name = `fork-test-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  const server = procwire.listen(name);
  t.after(() => server.close());
  await server.ready;
  const connect = await loopbackConnection(t);
  for (const withSocket of [false, true]) {
    const client = await procwire.connect(name);
    client.on('error', () => {});
    const destroying = { get x() { client.destroy(); return 1; } };
    if (!withSocket) {
      const sent = new Promise((resolve) => client.send(destroying, resolve));
      assert.strictEqual((await withTimeout(sent, 'the send callback')).code, 'ERR_PROCWIRE_CHANNEL_CLOSED');
      continue;
    }
    const { socket, remote } = await connect();
    const remoteEnded = once(remote, 'end');
    const sent = new Promise((resolve) => client.send(destroying, socket, resolve));
    assert.strictEqual((await withTimeout(sent, 'the send callback')).code, 'ERR_PROCWIRE_CHANNEL_CLOSED');
    await withTimeout(remoteEnded, 'the end of the connection');
  }
});

test('child.channel.send(message, socket) on a procwire child: later sends on either surface follow the ACK', { timeout: 30_000 }, async (t) => {
  const child = procwire.fork(FIXTURE, [], { child: 'procwire', serialization: 'advanced' });
  t.after(() => stop(child));
  const { socket } = await (await loopbackConnection(t))();
  const replies = [];
  const four = new Promise((resolve) => child.on('message', (m) => { replies.push(m); if (replies.length === 4) resolve(); }));
  const callbacks = [];
  child.channel.send({ text: 'from the channel' }, socket, (err) => callbacks.push(['socket', err]));
  child.channel.send({ op: 'echo', value: 1 }, (err) => callbacks.push(['1', err]));
  child.send({ op: 'echo', value: 2 }, (err) => callbacks.push(['2', err]));
  child.channel.send({ op: 'echo', value: 3 }, (err) => callbacks.push(['3', err]));
  await withTimeout(four, 'four replies');
  assert.deepStrictEqual(replies, [{ got: { text: 'from the channel' }, kind: 'net.Socket' }, { echo: 1 }, { echo: 2 }, { echo: 3 }]);
  assert.deepStrictEqual(callbacks.map(([which, err]) => [which, err || null]), [['socket', null], ['1', null], ['2', null], ['3', null]]);
});

// A driver on child.channel (as on a named channel) takes every message
// there; before, the ChildProcess surface also kept each one for a 'message'
// listener it might get later, so a busy channel's heap grew without bound
// and ran at a third of a named channel's speed (issue 35).
test("messages taken by child.channel's 'message' listeners are not kept for a later child 'message' listener", { timeout: 60_000 }, async (t) => {
  for (const mode of ['procwire', 'native', 'node']) {
    const child = procwire.fork(FIXTURE, [], { child: mode });
    t.after(() => stop(child));
    const onChannel = [];
    child.channel.on('message', (m) => onChannel.push(m.echo));
    for (let i = 1; i <= 3; i++) child.channel.send({ op: 'echo', value: i });
    await until(() => onChannel.length === 3, `${mode}: three echoes on child.channel`);
    const onChild = [];
    child.on('message', (m) => onChild.push(m.echo));
    child.channel.send({ op: 'echo', value: 4 });
    await until(() => onChild.length >= 1 && onChannel.length === 4, `${mode}: the fourth echo on both`);
    assert.deepStrictEqual(onChannel, [1, 2, 3, 4], mode);
    assert.deepStrictEqual(onChild, [4], mode);
    await stop(child);
  }
});

test('named unix channels pass handles; TCP channels refuse them with a coded error', { timeout: 30_000 }, async (t) => {
  const name = `fork-test-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  const server = procwire.listen(name);
  t.after(() => server.close());
  await server.ready;
  const accepted = once(server, 'channel');
  const client = await procwire.connect(name);
  t.after(() => client.destroy());
  const [peer] = await accepted;

  const tcpServer = net.createServer((s) => s.once('data', (d) => s.end(`through ${d}`)));
  t.after(() => tcpServer.close());
  await new Promise((resolve) => tcpServer.listen(0, '127.0.0.1', resolve));
  const socket = net.connect(tcpServer.address().port, '127.0.0.1');
  await once(socket, 'connect');
  const got = nextMessage(peer);
  client.send({ here: 'a socket' }, socket);
  const { message, handle } = await got;
  assert.deepStrictEqual(message, { here: 'a socket' });
  assert.ok(handle instanceof net.Socket);
  handle.write('a passed handle');
  assert.strictEqual(await readAll(handle), 'through a passed handle');

  const tcp = procwire.listen({ port: 0, host: '127.0.0.1' }, { auth: false });
  t.after(() => tcp.close());
  await tcp.ready;
  const tcpClient = await procwire.connect({ port: tcp.address().port, host: '127.0.0.1' }, { auth: false });
  t.after(() => tcpClient.destroy());
  assert.throws(() => tcpClient.send({ x: 1 }, tcpServer), { code: 'ERR_PROCWIRE_HANDLE_UNSUPPORTED' });
});

test('descriptors that come without a NODE_HANDLE message are closed at once, and the channel goes on', { timeout: 30_000 }, async (t) => {
  const name = `fork-fd-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  const server = procwire.listen(name);
  t.after(() => server.close());
  await server.ready;
  const accepted = once(server, 'channel');
  const client = await procwire.connect(name);
  t.after(() => client.destroy());
  const [peer] = await accepted;
  // One round trip first: by its end both ends have set up their
  // shared-memory rings, whose descriptors are not what this test counts.
  client.send('warm-up');
  await withTimeout(once(peer, 'message'), 'warm-up');
  peer.send('warm-up');
  await withTimeout(once(client, 'message'), 'warm-up');
  const countFds = () => fs.readdirSync('/proc/self/fd').length;
  const frame = procwire.codec.advanced.encode({ plain: true });
  const fd = fs.openSync(__filename, 'r');
  t.after(() => fs.closeSync(fd));
  const before = countFds();
  const N = 300;  // more than the old limit of 256 waiting descriptors
  const all = new Promise((resolve) => {
    let n = 0;
    peer.on('message', () => { if (++n === N) resolve(); });
  });
  for (let i = 0; i < N; i++) client[kWriter].sendRaw(frame, [fd]);
  await withTimeout(all, 'messages');
  // Let the sender's copies go too (closed once sent): a deadline on the
  // count, not a fixed pause, which a loaded machine can outlast.
  await wait.until(() => countFds() <= before + 2, 30_000, 'the sent descriptors to be closed').catch(() => {});
  assert.ok(countFds() <= before + 2, `descriptors leaked: ${before} -> ${countFds()}`);
  assert.strictEqual(peer.connected, true);
  assert.strictEqual(typeof binding.closeFd, 'function');
});

test("by default an unmodified child is served natively ('native'), except where it cannot be", { timeout: 30_000 }, async () => {
  const probe = "process.on('message', () => { process.send(typeof process.channel.stats); process.disconnect(); });";
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-default-'));
  const file = path.join(dir, 'probe.js');
  fs.writeFileSync(file, probe);
  try {
    const kinds = [];
    const permission = NODE_MAJOR < 22 ? '--experimental-permission' : '--permission';
    for (const options of [{}, { execPath: process.execPath }, { execArgv: [permission, '--allow-fs-read=*'] }]) {
      const child = procwire.fork(file, [], options);
      try {
        child.send('which');
        kinds.push((await nextMessage(child)).message);
      } finally {
        await stop(child);
      }
    }
    // Native: the child's process.channel is procwire's Channel. Under the
    // permission model the child keeps Node's own channel (no stats()).
    assert.deepStrictEqual(kinds, ['function', 'function', 'undefined']);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

for (const policy of ['rr', 'none']) {
  test(`cluster (${policy}): an HTTP server in 2 workers forked through procwire serves from both`, { timeout: 60_000 }, () => {
    const out = childProcess.execFileSync(process.execPath, [CLUSTER_FIXTURE, 'procwire', policy],
      { timeout: 30_000, encoding: 'utf8' });
    const result = JSON.parse(out.trim().split('\n').pop());
    assert.deepStrictEqual(result, {
      online: 2, servedBy: 2, failed: 0, procwireChannels: true,
      exits: [{ code: 0, signal: null, afterDisconnect: true }, { code: 0, signal: null, afterDisconnect: true }],
    });
  });
}

test('procwire.cluster after cluster was loaded is a coded error', () => {
  const out = childProcess.execFileSync(process.execPath, ['-e', `
    require('cluster');
    try { require(${JSON.stringify(path.join(__dirname, '..'))}).cluster; console.log('no error'); }
    catch (err) { console.log(err.code); }
  `], { timeout: STEP_TIMEOUT, encoding: 'utf8' });
  assert.strictEqual(out.trim(), 'ERR_PROCWIRE_CLUSTER_LOADED');
});

// Node's child keeps running while a send is still being written, even with
// no 'message' listener (its channel is unref'd then, but the pending write
// is not); a child that sends and has nothing else to do must not exit with
// its messages half out. The messages here are big enough not to fit the
// socket's buffer in one write, inline (json) and in segments (advanced).
test('a child that sends big messages and then runs out of work exits only after they are out', { timeout: 60_000 }, async (t) => {
  const file = childScript(t, 'procwire-send-exit-', 'sender.js', [
    "'use strict';",
    "if (process.argv[2] === 'json') {",
    "  for (let i = 0; i < 3; i++) process.send(String(i).repeat(300000));",
    "} else if (process.argv[2] === 'advanced') {",
    "  for (let i = 0; i < 3; i++) process.send(new Uint8Array(3 << 20).fill(i + 1));",
    "} else {",
    "  // Each callback sends the next; the last one exits at once, as a",
    "  // program does once its callbacks said everything was written.",
    "  let left = 6;",
    "  const payload = Buffer.alloc(200000, 7);",
    "  (function next() { if (left-- > 0) process.send(payload, next); else process.exit(0); })();",
    "}",
    '',
  ]);
  const cases = [['json', 'json', 3], ['advanced', 'advanced', 3], ['callbacks', 'advanced', 6]];
  const node = await sideBySide(t, async (variant) => {
    const seen = {};
    for (const [mode, serialization] of cases) {
      const child = variant.fork(file, [mode], { serialization, stdio: 'inherit' });
      try {
        let count = 0;
        let intact = true;
        child.on('message', (m) => {
          count++;
          const first = typeof m === 'string' ? m[0] : String(m[0]);
          const whole = typeof m === 'string' ? m === first.repeat(m.length) : m.every((b) => b === m[0]);
          if (!whole) intact = false;
          if (first === undefined) intact = false;
        });
        const [code] = await once(child, 'close');
        seen[mode] = { count, intact, code };
      } finally {
        await stop(child);
      }
    }
    return seen;
  }, PLAIN_CHILD_VARIANTS);
  for (const [mode, , expected] of cases) assert.deepStrictEqual(node[mode], { count: expected, intact: true, code: 0 });
});

// Node asks for 'message' listeners per message: the messages after a
// once() listener that are read with it wait for the next listener, in
// order, on either side. procwire remembers the answer between listener
// changes, so this fails if a change in the middle of a batch is missed.
test("a 'message' listener gone in the middle of a batch: the rest wait for the next one, in order, on both sides", { timeout: 60_000 }, async (t) => {
  const file = childScript(t, 'procwire-listener-gone-', 'child.js', [
    "'use strict';",
    'const got = [];',
    "process.once('message', (m) => {",
    '  got.push(m.i);',
    '  // The rest of the burst is read by now; a listener comes back later.',
    "  setTimeout(() => process.on('message', (m) => {",
    '    got.push(m.i);',
    '    if (got.length === 8) process.send({ got });',
    '  }), 50);',
    '});',
    "process.send('ready');",
    '',
  ]);
  const node = await sideBySide(t, async (variant) => {
    const child = variant.fork(file, [], {});
    try {
      await nextMessage(child, (m) => m === 'ready');
      // The parent side: the child's burst is read in one go too.
      for (let i = 0; i < 8; i++) child.send({ i });
      const { message } = await nextMessage(child, (m) => m && Array.isArray(m.got));
      return message.got;
    } finally {
      await stop(child);
    }
  }, PLAIN_CHILD_VARIANTS);
  assert.deepStrictEqual(node, [0, 1, 2, 3, 4, 5, 6, 7]);
  await sideBySide(t, async (variant) => {
    const child = variant.fork(FIXTURE, [], {});
    try {
      const got = [];
      const done = new Promise((resolve) => {
        child.once('message', (m) => {
          got.push(m.i);
          setTimeout(() => child.on('message', (m) => {
            got.push(m.i);
            if (got.length === 8) resolve();
          }), 50);
        });
      });
      child.send({ op: 'many', n: 8 });
      await withTimeout(done, 'the burst');
      assert.deepStrictEqual(got, [0, 1, 2, 3, 4, 5, 6, 7], variant.name);
      return got;
    } finally {
      await stop(child);
    }
  });
});

// After a read, a socket channel may keep its event loop polling for a
// moment (so the child's next answer does not have to wake this process);
// once the answers stop, so must the polling.
test('a parent that spun while a plain child answered uses no CPU once the answers stop', { timeout: 60_000 }, async (t) => {
  const child = procwire.fork(FIXTURE, [], { child: 'node' });
  t.after(() => stop(child));
  await withTimeout(new Promise((resolve) => {
    let got = 0;
    child.on('message', (m) => {
      if (!m || m.echo === undefined) return;
      if (++got === 3000) resolve();
      else if (got <= 3000 - 16) child.send({ op: 'echo', value: got });
    });
    for (let i = 0; i < 16; i++) child.send({ op: 'echo', value: i });
  }), 'the echoes');
  await new Promise((resolve) => setTimeout(resolve, 100));
  const before = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const used = process.cpuUsage(before);
  const ms = (used.user + used.system) / 1000;
  t.diagnostic(`idle 2 s after 3000 echoes: parent ${ms.toFixed(1)} ms of CPU`);
  assert.ok(ms < 150, `the parent used ${ms.toFixed(1)} ms of CPU in 2 s without messages`);
});

// Node writes a send at once, so what a child sent right before
// process.exit() reaches the parent; procwire's gathered write must happen
// before the exit too.
test('messages sent right before process.exit() reach the parent', { timeout: 30_000 }, async (t) => {
  const file = childScript(t, 'procwire-exit-send-', 'exiter.js', [
    "'use strict';",
    "process.send({ cmd: 'plain' });",
    "process.send({ cmd: 'NODE_internal' });",
    "process.send('last');",
    'process.exit(0);',
    '',
  ]);
  const node = await sideBySide(t, async (variant) => {
    const seen = {};
    for (const serialization of ['json', 'advanced']) {
      const child = variant.fork(file, [], { serialization, stdio: 'inherit' });
      try {
        const messages = [];
        const internal = [];
        child.on('message', (m) => messages.push(m));
        child.on('internalMessage', (m) => internal.push(m));
        const [code] = await once(child, 'close');
        seen[serialization] = { messages, internal, code };
      } finally {
        await stop(child);
      }
    }
    return seen;
  }, PLAIN_CHILD_VARIANTS);
  for (const serialization of ['json', 'advanced']) {
    assert.deepStrictEqual(node[serialization],
      { messages: [{ cmd: 'plain' }, 'last'], internal: [{ cmd: 'NODE_internal' }], code: 0 });
  }
});

// The child's first write can find the parent already gone (procwire's child
// announces its capabilities at start); what the parent sent before it
// disconnected must still be delivered, as Node delivers it.
test('a message sent right before disconnect() reaches the child', { timeout: 30_000 }, async (t) => {
  const file = childScript(t, 'procwire-send-disconnect-', 'receiver.js', [
    "'use strict';",
    'const got = [];',
    "process.on('message', (m) => got.push(m));",
    "process.on('disconnect', () => process.stdout.write(JSON.stringify(got)));",
    '',
  ]);
  const node = await sideBySide(t, async (variant) => {
    const seen = {};
    for (const serialization of ['json', 'advanced']) {
      const child = variant.fork(file, [], { serialization, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
      try {
        const output = readAll(child.stdout);
        child.send({ k: 1 });
        child.disconnect();
        const [code] = await once(child, 'exit');
        seen[serialization] = { got: JSON.parse(await output), code };
      } finally {
        await stop(child);
      }
    }
    return seen;
  }, PLAIN_CHILD_VARIANTS);
  for (const serialization of ['json', 'advanced']) assert.deepStrictEqual(node[serialization], { got: [{ k: 1 }], code: 0 });
});

// Node's send() throws its serializer's own error for a value it cannot send
// (JSON.stringify's TypeError in json mode, V8's DataCloneError in advanced
// mode); code that matches on err.name or err.message must see the same.
test("unsendable values: send() throws Node's own serializer errors, in the parent and in the child", { timeout: 60_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-unsendable-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'unsendable.js');
  const values = "[{ big: 1n }, (() => { const o = {}; o.self = o; return o; })(), { f() {} }, [Symbol('s')]]";
  fs.writeFileSync(file, [
    "'use strict';",
    `const values = ${values};`,
    'const errors = values.map((v) => {',
    '  try { process.send(v); return null; } catch (err) { return { name: err.name, code: err.code, message: err.message }; }',
    '});',
    "process.send(JSON.stringify(errors), () => process.disconnect());",
    '',
  ].join('\n'));
  const parentValues = () => eval(values);
  const observe = (childSide) => async (variant) => {
    const seen = {};
    for (const serialization of ['json', 'advanced']) {
      const child = variant.fork(file, [], { serialization, stdio: 'inherit' });
      try {
        const parent = parentValues().map((v) => thrown(() => child.send(v)));
        seen[serialization] = childSide
          ? JSON.parse((await nextMessage(child, (m) => typeof m === 'string')).message)
          : parent;
      } finally {
        await stop(child);
      }
    }
    return seen;
  };
  // The parent side on every variant; the child's process.send on the
  // variants whose child runs this plain script.
  const parentSide = await sideBySide(t, observe(false));
  const nodeChildSide = await sideBySide(t, observe(true), PLAIN_CHILD_VARIANTS);
  // (The child's list came as JSON, which leaves out `code: undefined`.)
  assert.deepStrictEqual(JSON.parse(JSON.stringify(parentSide)), nodeChildSide);
  // The observations are not empty: each mode refused at least one value.
  assert.ok(nodeChildSide.json.some((e) => e !== null && e.name === 'TypeError'));
  assert.ok(nodeChildSide.advanced.some((e) => e !== null && /could not be cloned/.test(e.message)));
});
