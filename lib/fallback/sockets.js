'use strict';
// Descriptors for the pure-JavaScript binding. The addon hands lib/ plain
// file descriptors; here the same numbers are tokens in a registry that maps
// each to the net.Socket or net.Server owning it, so lib/transport/socket.js and
// lib/fork.js run unchanged. A socket whose descriptor does not exist yet (a
// TCP connect in progress, the parent end of a socketPair() still being
// accepted) gets a token above any real descriptor.
//
// Where Node only reports asynchronously what the addon returns at once:
//   - listen errors: Node emits them on the next tick; listenSync() catches
//     the error object as it is scheduled, so -errno comes back synchronously;
//   - a unix socket file is bound under a temporary name in the same
//     directory, then hard-linked to its real name: like the addon, no window
//     with open permissions, EADDRINUSE for an existing file, and closing the
//     listener leaves the file (libuv would unlink it) for lib/transport/socket.js to
//     remove; a stale file (nobody accepting) is replaced after a
//     synchronous probe, as lib/transport/socket.js does with the addon.
//   - peer credentials (SO_PEERCRED) have no JavaScript API: -ENOSYS.

const fs = require('fs');
const os = require('os');
const path = require('path');
const net = require('net');
const crypto = require('crypto');
const childProcess = require('child_process');

const E = os.constants.errno;
const MAX_UNIX_PATH = 107;
const TOKEN_BASE = 0x40000000;

// fd or token -> { kind: 'socket' | 'server' | 'pending', obj, claimed, ... }
const registry = new Map();
let nextToken = TOKEN_BASE;

function realFd(obj) {
  const h = obj._handle;
  return h && typeof h.fd === 'number' && h.fd >= 0 ? h.fd : -1;
}

function register(entry, preferFd) {
  const key = preferFd >= 0 ? preferFd : nextToken++;
  const old = registry.get(key);
  // A reused descriptor number: the old object's descriptor is long gone.
  if (old !== undefined && old !== entry && old.kind === 'socket' && !old.claimed) old.obj.destroy();
  registry.set(key, entry);
  entry.key = key;
  return key;
}

function unregister(entry) {
  if (registry.get(entry.key) === entry) registry.delete(entry.key);
}

function registerSocket(socket) {
  const entry = { kind: 'socket', obj: socket, claimed: false, key: -1 };
  // Until a channel takes it, errors must not be uncaught.
  socket.on('error', () => {});
  socket.once('close', () => unregister(entry));
  return register(entry, realFd(socket));
}

// Takes the object behind fd for a channel or listener; undefined if unknown.
function claim(fd) {
  const entry = registry.get(fd);
  if (entry === undefined) return undefined;
  if (entry.claimed) throw new Error(`procwire fallback: descriptor ${fd} is already in use`);
  entry.claimed = true;
  return entry;
}

// Runs start() (a net.Server listen) and returns 0 or the -errno Node would
// emit as 'error' on the next tick.
function listenSync(server, start) {
  let captured = null;
  const nextTick = process.nextTick;
  process.nextTick = function interceptListenError(fn, ...args) {
    if (captured === null && args[0] === server && args[1] instanceof Error) {
      captured = args[1];
      return undefined;
    }
    return nextTick.call(process, fn, ...args);
  };
  try {
    start();
  } catch (err) {
    captured = err;
  } finally {
    process.nextTick = nextTick;
  }
  if (captured !== null) {
    server.close(() => {});
    return typeof captured.errno === 'number' && captured.errno < 0 ? captured.errno : -E.EINVAL;
  }
  if (!server._handle) return -E.EINVAL;
  return 0;
}

function makeServer() {
  const server = net.createServer({ pauseOnConnect: true, allowHalfOpen: true });
  const entry = { kind: 'server', obj: server, claimed: false, key: -1, early: [], onSocket: null, onError: null };
  server.on('connection', (socket) => {
    if (entry.onSocket !== null) entry.onSocket(socket);
    else entry.early.push(socket);
  });
  server.on('error', (err) => {
    if (entry.onError !== null) entry.onError(err);
  });
  return entry;
}

function errnoOf(err, fallback) {
  if (err && typeof err.code === 'string' && typeof E[err.code] === 'number') return -E[err.code];
  return fallback;
}

function tooLong(p) {
  const n = Buffer.byteLength(p);
  return n === 0 || n > MAX_UNIX_PATH;
}

// Whether anyone accepts on a unix socket file, asked synchronously (a tiny
// child process connects): 1 someone does, -ECONNREFUSED nobody, 0 unknown.
function probeUnixSync(file) {
  const code = "const s=require('net').connect(process.argv[1]);" +
    "s.on('connect',()=>{process.stdout.write('ok');process.exit(0)});" +
    "s.on('error',(e)=>{process.stdout.write(String(e.code));process.exit(0)});";
  try {
    const r = childProcess.spawnSync(process.execPath, ['-e', code, file],
      { timeout: 5000, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], env: { PATH: process.env.PATH || '' } });
    if (r.stdout === 'ok') return 1;
    if (r.stdout === 'ECONNREFUSED') return -E.ECONNREFUSED;
  } catch { /* unknown */ }
  return 0;
}

function linkInPlace(tmp, file) {
  try {
    fs.linkSync(tmp, file);
    return 0;
  } catch (err) {
    if (err.code === 'EEXIST') return -E.EADDRINUSE;
    if (err.code === 'EPERM' || err.code === 'ENOTSUP' || err.code === 'EOPNOTSUPP') {
      // No hard links here: not atomic, but still never replaces a file.
      if (fs.existsSync(file)) return -E.EADDRINUSE;
      fs.renameSync(tmp, file);
      return 1;
    }
    return errnoOf(err, -E.EINVAL);
  }
}

function bindUnixFile(entry, file, backlog) {
  const server = entry.obj;
  const tmp = path.join(path.dirname(file), `.pw${crypto.randomBytes(6).toString('hex')}`);
  if (tooLong(tmp)) {
    // No room for a temporary name: bind in place (closing the listener
    // then removes the file, as libuv does).
    if (fs.existsSync(file)) return -E.EADDRINUSE;
    let oldMask = null;
    try { oldMask = process.umask(0o077); } catch { /* workers cannot */ }
    let r;
    try {
      r = listenSync(server, () => server.listen({ path: file, backlog }));
    } finally {
      if (oldMask !== null) process.umask(oldMask);
    }
    if (r < 0) return r;
    try { fs.chmodSync(file, 0o600); } catch (err) { server.close(); return errnoOf(err, -E.EPERM); }
    return 0;
  }
  let oldMask = null;
  try { oldMask = process.umask(0o077); } catch { /* workers cannot */ }
  let r;
  try {
    r = listenSync(server, () => server.listen({ path: tmp, backlog }));
  } finally {
    if (oldMask !== null) process.umask(oldMask);
  }
  if (r < 0) return r;
  try {
    fs.chmodSync(tmp, 0o600);
    let linked = linkInPlace(tmp, file);
    if (linked === -E.EADDRINUSE) {
      // A file is there. A socket nobody accepts on was left by a process
      // that died: replace it. A live one, or anything else, is kept.
      let isSocket = false;
      try { isSocket = fs.lstatSync(file).isSocket(); } catch { /* gone meanwhile */ }
      if (isSocket && probeUnixSync(file) === -E.ECONNREFUSED) {
        try { fs.unlinkSync(file); } catch { /* gone */ }
        linked = linkInPlace(tmp, file);
      }
    }
    if (linked < 0) {
      server.close();
      try { fs.unlinkSync(tmp); } catch { /* gone */ }
      return linked;
    }
    if (linked === 0) fs.unlinkSync(tmp);
    return 0;
  } catch (err) {
    server.close();
    try { fs.unlinkSync(tmp); } catch { /* gone */ }
    return errnoOf(err, -E.EINVAL);
  }
}

// listenUnix(path, abstract, backlog) -> fd or -errno
function listenUnix(file, abstract, backlog) {
  if (tooLong(file)) return -E.ENAMETOOLONG;
  const entry = makeServer();
  const server = entry.obj;
  const r = abstract
    ? listenSync(server, () => server.listen({ path: `\0${file}`, backlog }))
    : bindUnixFile(entry, file, backlog);
  if (r < 0) return r;
  return register(entry, realFd(server));
}

// listenTcp(host, port, backlog) -> [fd, port] or -errno
function listenTcp(host, port, backlog) {
  const family = net.isIP(host);
  if (family === 0) return -E.EINVAL;
  const entry = makeServer();
  const server = entry.obj;
  // Server.listen() with a host always resolves it first, so binds a tick
  // later; _listen2 (Node's setupListenHandle) binds now.
  if (typeof server._listen2 !== 'function') return -E.ENOSYS;
  const r = listenSync(server, () => server._listen2(host, port, family, backlog));
  if (r < 0) return r;
  return [register(entry, realFd(server)), server.address().port];
}

function clientSocket(options) {
  const socket = net.connect({ ...options, allowHalfOpen: true });
  return socket;
}

// connectUnix(path, abstract) -> [fd, inProgress] or -errno
function connectUnix(file, abstract) {
  if (tooLong(file)) return -E.ENAMETOOLONG;
  if (!abstract) {
    // What connect() reports at once for a missing or non-socket file.
    let st;
    try {
      st = fs.statSync(file);
    } catch (err) {
      return errnoOf(err, -E.ENOENT);
    }
    if (!st.isSocket()) return -E.ECONNREFUSED;
  }
  const socket = clientSocket({ path: abstract ? `\0${file}` : file });
  return [registerSocket(socket), true];
}

// connectTcp(host, port) -> [fd, inProgress] or -errno
function connectTcp(host, port) {
  if (net.isIP(host) === 0) return -E.EINVAL;
  const socket = clientSocket({ host, port });
  return [registerSocket(socket), true];
}

// socketPair() -> [parentFd, childFd] or -errno. A private, temporary unix
// server: the child's end connects at once (a real descriptor, ready for
// spawn's stdio), the parent's end is the accepted connection, which a
// channel made on the parent token picks up when it arrives.
function socketPair() {
  let dir;
  try {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-'));
  } catch (err) {
    return errnoOf(err, -E.EIO);
  }
  const file = path.join(dir, 's');
  const serverEntry = makeServer();
  const server = serverEntry.obj;
  const cleanup = () => {
    try { fs.unlinkSync(file); } catch { /* gone */ }
    try { fs.rmdirSync(dir); } catch { /* gone */ }
  };
  const r = listenSync(server, () => server.listen({ path: file }));
  if (r < 0) {
    cleanup();
    return r;
  }
  const child = clientSocket({ path: file });
  child.pause();
  cleanup();
  const childFd = realFd(child);
  if (childFd < 0) {
    child.destroy();
    server.close();
    return -E.EMFILE;
  }
  const pending = { kind: 'pending', obj: null, claimed: false, key: -1, closed: false, error: 0, waiter: null };
  const settle = () => {
    if (pending.waiter !== null) {
      const w = pending.waiter;
      pending.waiter = null;
      w(pending.obj, pending.error);
    }
  };
  serverEntry.onSocket = (socket) => {
    server.close();
    if (pending.obj !== null || pending.closed) {
      socket.destroy();
      return;
    }
    pending.obj = socket;
    socket.on('error', () => {});
    socket.once('close', () => unregister(pending));
    settle();
  };
  serverEntry.onError = (err) => {
    server.close();
    pending.error = typeof err.errno === 'number' && err.errno < 0 ? err.errno : -E.EIO;
    settle();
  };
  const parentFd = register(pending, -1);
  return [parentFd, registerSocket(child)];
}

// For a channel made on a pending token: calls back (socket, -errno) once
// the accepted connection (or an error) is there.
function whenReady(entry, callback) {
  if (entry.obj !== null || entry.error !== 0) {
    process.nextTick(callback, entry.obj, entry.error);
    return;
  }
  entry.waiter = callback;
}

function closeFd(fd) {
  const entry = registry.get(fd);
  if (entry === undefined) {
    if (fd >= 0 && fd < TOKEN_BASE) {
      try { fs.closeSync(fd); } catch { /* not open */ }
    }
    return;
  }
  registry.delete(fd);
  if (entry.kind === 'socket') entry.obj.destroy();
  else if (entry.kind === 'server') entry.obj.close();
  else if (entry.kind === 'pending') {
    entry.closed = true;
    if (entry.obj !== null) entry.obj.destroy();
  }
}

// Descriptors a parent process handed over (a procwire child's channel):
// libuv makes them non-blocking when it opens them.
function setBlocking() {
  return 0;
}

// SO_PEERCRED has no JavaScript API.
function peerCredentials() {
  return -E.ENOSYS;
}

class NativeListener {
  constructor(fd, onconnection) {
    const entry = claim(fd);
    if (entry === undefined || entry.kind !== 'server') throw new Error(`procwire fallback: ${fd} is not a listener`);
    this._entry = entry;
    this._closed = false;
    entry.onSocket = (socket) => {
      if (this._closed) {
        socket.destroy();
        return;
      }
      onconnection([registerSocket(socket)], 0);
    };
    entry.onError = (err) => {
      if (!this._closed) onconnection([], errnoOf(err, typeof err.errno === 'number' ? err.errno : -E.EIO));
    };
    const early = entry.early;
    entry.early = [];
    if (early.length > 0) {
      process.nextTick(() => {
        for (const socket of early) entry.onSocket(socket);
      });
    }
  }

  close() {
    if (this._closed) return;
    this._closed = true;
    unregister(this._entry);
    this._entry.obj.close();
  }

  ref() { this._entry.obj.ref(); }
  unref() { this._entry.obj.unref(); }
}

module.exports = {
  registry, claim, whenReady, socketPair, closeFd, setBlocking, listenUnix, connectUnix, listenTcp,
  connectTcp, peerCredentials, NativeListener, TOKEN_BASE,
};
