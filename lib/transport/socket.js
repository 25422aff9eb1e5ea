'use strict';
// The native socket backend: named channels (unix sockets: a private
// directory or Linux's abstract namespace) and TCP, both a descriptor the
// addon's NativeChannel owns. Unix sockets also carry descriptors, so they
// take shared-memory segments and handles; TCP carries bytes only.

const fs = require('fs');
const os = require('os');
const path = require('path');
const dns = require('dns');
const net = require('net');
const { binding } = require('../native');
const { Channel } = require('../channel');
const { codecFor } = require('../codec');
const { makeError, systemError } = require('../errors');
const { withAddress } = require('../error-context');
const { invalidArg, validateObject, validateSize } = require('../validate');
const auth = require('../security');
const { ServerBase, listenArguments, setReady } = require('./server');
const { DEFAULT_HELLO_TIMEOUT } = require('../protocol');
const {
  kAddress, kAdmit, kAllowedUids, kBoundPort, kClosed, kHost, kKeyFile, kKeyIno, kListen, kListener, kOptions,
  kRefListener, kReport, kSecret, kSetupHello, kSocketIno, kStop,
} = require('./symbols');

// Accept failures (out of descriptors) are reported at most this often.
const ACCEPT_ERROR_INTERVAL = 1000;

// Which secret a listener or connector uses, or null for none:
//   options.auth === false        no handshake (explicitly insecure);
//   options.secret / PROCWIRE_SECRET  that secret;
//   a unix path (not abstract)    the 0600 key file beside the socket, which
//                                 only the same user can read (servers make it);
//   otherwise (TCP, abstract)     ERR_PROCWIRE_AUTH_REQUIRED.
function secretFor(address, options, role) {
  if (options.auth === false) return null;
  const explicit = auth.resolveSecret(options, address.kind);
  if (explicit) return explicit;
  if (address.kind === 'unix' && !address.abstract) {
    // Servers make the file after binding; clients read it once connected,
    // so a missing server is reported as a failed connect.
    return role === 'server' ? null : 'keyfile';
  }
  throw makeError('ERR_PROCWIRE_AUTH_REQUIRED',
    `${address.kind === 'tcp' ? 'TCP' : 'abstract'} channels need a secret: pass { secret } (or set PROCWIRE_SECRET), or { auth: false } to accept anyone who can connect`);
}

// The private directory for named channels: <runtime dir>/procwire-<uid>,
// mode 0700, owned by us. Refuses one that another user could enter.
function channelDirectory() {
  const base = process.env.PROCWIRE_DIR
    || (process.env.XDG_RUNTIME_DIR && fs.existsSync(process.env.XDG_RUNTIME_DIR) ? process.env.XDG_RUNTIME_DIR : os.tmpdir());
  const dir = path.join(base, `procwire-${process.getuid()}`);
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if (err.code !== 'EEXIST') throw err;
  }
  const st = fs.lstatSync(dir);
  if (!st.isDirectory() || st.uid !== process.getuid() || (st.mode & 0o077) !== 0) {
    throw makeError('ERR_PROCWIRE_INSECURE_PATH',
      `${dir} must be a directory owned by uid ${process.getuid()} with mode 0700`);
  }
  return dir;
}

// Resolves what the user named into an address:
//   'name'               -> unix socket <private dir>/name.sock
//   '/abs/path.sock'     -> that unix socket path
//   { path }             -> that unix socket path
//   { name, abstract }   -> Linux abstract socket "procwire-<uid>/<name>"
//   { port, host }       -> TCP (host defaults to 127.0.0.1)
function resolveAddress(target) {
  if (typeof target === 'string') {
    if (target.length === 0) throw invalidArg('channel name must not be empty');
    if (target.includes('/')) return { kind: 'unix', path: target, abstract: false };
    if (target.includes('\0')) throw invalidArg('channel name must not contain NUL');
    return { kind: 'unix', path: path.join(channelDirectory(), `${target}.sock`), abstract: false, named: true };
  }
  target = validateObject(target, 'address');
  if (target.port !== undefined) {
    if (!Number.isInteger(target.port) || target.port < 0 || target.port > 65535) {
      throw invalidArg('port must be an integer from 0 to 65535');
    }
    return { kind: 'tcp', host: target.host === undefined ? '127.0.0.1' : String(target.host), port: target.port };
  }
  if (typeof target.path === 'string') return { kind: 'unix', path: target.path, abstract: false };
  if (typeof target.name === 'string' && target.abstract) {
    return { kind: 'unix', path: `procwire-${process.getuid()}/${target.name}`, abstract: true };
  }
  if (typeof target.name === 'string') return resolveAddress(target.name);
  throw invalidArg('address must be a name, a path, { path }, { name, abstract } or { port, host }');
}

// A file's identity: tmpfs reuses inode numbers at once, so the inode is
// paired with the nanosecond change time.
function inodeOf(file) {
  try {
    const st = fs.lstatSync(file, { bigint: true });
    return `${st.ino}:${st.ctimeNs}`;
  } catch {
    return null;
  }
}

function unlinkIfSame(file, identity) {
  if (!identity || inodeOf(file) !== identity) return;
  try { fs.unlinkSync(file); } catch { /* already gone */ }
}

async function numericHost(host) {
  if (net.isIP(host)) return host;
  const { address } = await dns.promises.lookup(host);
  return address;
}

function channelOptions(options, address) {
  return {
    serialization: options.serialization,
    maxMessageSize: options.maxMessageSize,
    highWaterMark: options.highWaterMark,
    maxQueuedBytes: options.maxQueuedBytes,
    maxConcurrentRequests: options.maxConcurrentRequests,
    requestTimeout: options.requestTimeout,
    // Both ends of a named channel are procwire on one machine: large views
    // may go through shared memory. TCP never carries descriptors.
    segments: address.kind === 'unix',
    outOfLine: options.outOfLine,
    rings: options.rings,
    outOfLineThreshold: options.outOfLineThreshold,
    maxSegmentsInFlight: options.maxSegmentsInFlight,
    // Recycled, writable segments are off by default between unrelated
    // processes (see docs/rings.md); both ends must turn them on.
    segmentPool: options.segmentPool,
    segmentPoolMaxBytes: options.segmentPoolMaxBytes,
    segmentPoolMaxCount: options.segmentPoolMaxCount,
    segmentPoolIdleTimeout: options.segmentPoolIdleTimeout,
  };
}

// The state every unix/TCP server keeps, whatever does its I/O (the addon
// here, net.Server in the fallback backend): the address, options, the
// hello's secret and limits, and the uids a unix peer may have. Throws a
// coded error for anything listen() would not have made.
function initSocketServer(server, address, options) {
  if (address === null || typeof address !== 'object' || (address.kind !== 'unix' && address.kind !== 'tcp')) {
    throw invalidArg('Server is made by listen(address[, options][, onChannel])');
  }
  options = validateObject(options, 'options');
  // A server makes its channels when descriptors may have run out (a flood
  // of connections): what making one loads (its codec's JavaScript half,
  // for advanced) is loaded now, as a require() then would fail with EMFILE.
  codecFor(options.serialization === undefined ? 'advanced' : options.serialization);
  server[kAddress] = address;
  server[kOptions] = options;
  server[kBoundPort] = null;
  server[kKeyFile] = null;
  server[kSetupHello](secretFor(address, options, 'server'), options);
  const uid = process.getuid();
  server[kAllowedUids] = options.allowUids === undefined ? [uid] : options.allowUids;
  if (!Array.isArray(server[kAllowedUids]) && server[kAllowedUids] !== '*') {
    throw invalidArg('options.allowUids must be an array of uids or "*"');
  }
}

// Removes what a unix/TCP server created on disk when it stops: its socket
// file (only if it was bound, and only while the file is still the one it
// made) and its secret key file.
function removeSocketServerFiles(server, bound) {
  const a = server[kAddress];
  if (bound && a.kind === 'unix' && !a.abstract) unlinkIfSame(a.path, server[kSocketIno]);
  if (server[kKeyFile]) unlinkIfSame(server[kKeyFile], server[kKeyIno]);
}

// server.address() of a unix/TCP server.
function socketServerAddress(server) {
  if (server[kAddress].kind === 'tcp') return { host: server[kHost], port: server[kBoundPort] };
  return { path: server[kAddress].path, abstract: server[kAddress].abstract };
}

// What every unix/TCP server is, whatever does its I/O (the addon here,
// net.Server in the fallback backend, tls.Server in tls.js): its state,
// address(), and the listener (kListener) it refs and unrefs.
class SocketServerBase extends ServerBase {
  // Made by listen(); called from user code with anything else, it throws a
  // coded error.
  constructor(address, options) {
    super();
    initSocketServer(this, address, options);
    this[kListener] = null;
  }

  address() {
    return socketServerAddress(this);
  }

  [kRefListener](on) {
    const listener = this[kListener];
    if (listener) {
      if (on) listener.ref(); else listener.unref();
    }
  }
}

class Server extends SocketServerBase {
  // When an accept failure was last reported, and how many came since.
  #lastAcceptError = 0;
  #suppressedAcceptErrors = 0;

  [kListen](host) {
    const a = this[kAddress];
    let fd;
    const backlog = this[kOptions].backlog || 511;
    if (a.kind === 'tcp') {
      const r = binding.listenTcp(host, a.port, backlog);
      if (typeof r === 'string') throw systemError('ERR_PROCWIRE_LISTEN_FAILED', r, 'listen', `${host}:${a.port}`);
      [fd, this[kBoundPort]] = r;
      this[kHost] = host;
    } else {
      fd = binding.listenUnix(a.path, a.abstract, backlog);
      if (fd === 'EADDRINUSE' && !a.abstract && this.#removeIfStale(a.path)) {
        fd = binding.listenUnix(a.path, a.abstract, backlog);
      }
      if (typeof fd === 'string') throw systemError('ERR_PROCWIRE_LISTEN_FAILED', fd, 'listen', a.path);
      // Remembered so close() removes this server's file only, not one a
      // later server bound after ours was deleted.
      if (!a.abstract) this[kSocketIno] = inodeOf(a.path);
      if (!a.abstract && this[kOptions].auth !== false && this[kSecret] === null) {
        // The key file lives beside the socket with the same 0600 rights; a
        // leftover one from a dead server is replaced with a fresh secret.
        try {
          auth.removeSecretFile(a.path);
          this[kSecret] = Buffer.from(auth.createSecretFile(a.path));
          this[kKeyFile] = auth.secretFileFor(a.path);
          this[kKeyIno] = inodeOf(this[kKeyFile]);
        } catch (err) {
          binding.closeFd(fd);
          try { fs.unlinkSync(a.path); } catch { /* gone */ }
          throw makeError('ERR_PROCWIRE_LISTEN_FAILED', `cannot create key file: ${err.message}`, err);
        }
      }
    }
    this[kListener] = new binding.NativeListener(fd, (fds, error) => this.#onConnections(fds, error));
  }

  // A socket file nobody accepts on is left by a process that died; it may
  // be replaced. A live one is not touched.
  #removeIfStale(file) {
    const r = binding.connectUnix(file, false);
    if (typeof r !== 'string') {
      binding.closeFd(r[0]);
      return false;
    }
    if (r !== 'ECONNREFUSED') return false;
    try {
      if (!fs.lstatSync(file).isSocket()) return false;
      fs.unlinkSync(file);
      return true;
    } catch {
      return false;
    }
  }

  #onConnections(fds, error) {
    if (error !== undefined) this.#reportAcceptError(error);
    for (const fd of fds) {
      if (this[kClosed]) {
        binding.closeFd(fd);
        continue;
      }
      let peer = null;
      if (this[kAddress].kind === 'unix') {
        const cred = binding.peerCredentials(fd);
        if (typeof cred !== 'string') peer = { pid: cred[0], uid: cred[1], gid: cred[2] };
        // Without SO_PEERCRED (the JS fallback answers ENOSYS) the socket
        // file's 0600 mode is what admits only this user, so the default
        // same-uid policy holds; an explicit allow-list cannot be checked.
        const unverifiable = cred === 'ENOSYS' && this[kOptions].allowUids === undefined;
        if (this[kAllowedUids] !== '*' && !unverifiable && (peer === null || !this[kAllowedUids].includes(peer.uid))) {
          binding.closeFd(fd);
          this.emit('reject', makeError('ERR_PROCWIRE_PEER_REJECTED',
            `peer uid ${peer && peer.uid} is not allowed`, undefined, { peer }));
          continue;
        }
      }
      this[kAdmit](new Channel(fd, {
        ...channelOptions(this[kOptions], this[kAddress]), transport: this[kAddress].kind, peer,
        hello: this[kSecret] !== null ? 'server' : undefined,
      }));
    }
  }

  // Out of descriptors (EMFILE/ENFILE): the addon sheds the pending
  // connections and backs off; here the failure is reported at most once a
  // second, with how many more were seen meanwhile.
  #reportAcceptError(error) {
    const now = Date.now();
    if (now - this.#lastAcceptError < ACCEPT_ERROR_INTERVAL) {
      this.#suppressedAcceptErrors++;
      return;
    }
    const suppressed = this.#suppressedAcceptErrors;
    this.#lastAcceptError = now;
    this.#suppressedAcceptErrors = 0;
    const err = systemError('ERR_PROCWIRE_SOCKET', error, 'accept',
      suppressed > 0 ? `(${suppressed} more in the last second)` : undefined);
    this[kReport](err);
  }

  // close() (ServerBase) stops accepting and removes the socket file.
  [kStop]() {
    if (this[kListener]) this[kListener].close();
    removeSocketServerFiles(this, Boolean(this[kListener]));
  }
}

// What listen() does first for a unix/TCP server class (this one or the
// fallback's): checks the arguments, resolves the address and makes the
// server with its 'channel' listener.
function newSocketServer(ServerClass, target, options, onChannel) {
  ({ options, onChannel } = listenArguments(options, onChannel));
  if (options.tls !== undefined) {
    throw invalidArg('options.tls (an object of node:tls options) applies to TCP addresses only');
  }
  const server = new ServerClass(resolveAddress(target), options);
  if (onChannel !== undefined) server.on('channel', onChannel);
  return server;
}

// listen(address[, options][, onChannel]) -> Server. Emits 'listening' once
// bound (unix sockets and numeric TCP hosts are bound before listen returns),
// 'channel' for each accepted peer, 'reject' for peers refused by uid.
function listen(target, options, onChannel) {
  const server = newSocketServer(Server, target, options, onChannel);
  const address = server[kAddress];
  const ready = () => process.nextTick(() => server.emit('listening'));
  if (address.kind === 'tcp' && !net.isIP(address.host)) {
    numericHost(address.host).then((host) => {
      if (server[kClosed]) return;
      server[kListen](host);
      ready();
    }).catch((err) => server.emit('error', makeError('ERR_PROCWIRE_LISTEN_FAILED', err.message, err)));
  } else {
    server[kListen](address.kind === 'tcp' ? address.host : undefined);
    ready();
  }
  return setReady(server);
}

// What every connecting backend works out first: the checked options, the
// address, the secret (or null) and the hello's time limit.
function clientSettings(target, options) {
  options = validateObject(options, 'options');
  const address = resolveAddress(target);
  const secret = secretFor(address, options, 'client');
  const helloTimeout = validateSize(options.helloTimeout, 'helloTimeout', DEFAULT_HELLO_TIMEOUT, 2 ** 31 - 1);
  return { options, address, secret, helloTimeout };
}

// connect(address[, options]) -> Promise<Channel>, resolved once connected.
async function connect(target, options) {
  let address, secret, helloTimeout;
  ({ options, address, secret, helloTimeout } = clientSettings(target, options));
  let r;
  let where;
  if (address.kind === 'tcp') {
    const host = await numericHost(address.host);
    where = `${host}:${address.port}`;
    r = binding.connectTcp(host, address.port);
  } else {
    where = address.path;
    r = binding.connectUnix(address.path, address.abstract);
  }
  if (typeof r === 'string') throw withAddress(systemError('ERR_PROCWIRE_CONNECT_FAILED', r, 'connect', where), address, where);
  const [fd, inProgress] = r;
  const channel = new Channel(fd, {
    ...channelOptions(options, address), connecting: inProgress, transport: address.kind,
    hello: secret !== null ? 'client' : undefined,
  });
  if (inProgress) {
    await new Promise((resolve, reject) => {
      const onClose = (reason, err) =>
        reject(withAddress(err || makeError('ERR_PROCWIRE_CONNECT_FAILED', `connect ${where} failed`), address, where));
      channel.once('connect', () => { channel.off('close', onClose); resolve(); });
      channel.once('close', onClose);
    });
  }
  await authenticateClient(channel, secret, address, helloTimeout);
  return channel;
}

// The client's side of the hello. A failure destroys the channel; errors
// during the hello are the promise's, not the channel's 'error' events.
async function authenticateClient(channel, secret, address, helloTimeout) {
  if (secret === null) return;
  const quiet = () => {};
  channel.on('error', quiet);
  try {
    const key = secret === 'keyfile' ? Buffer.from(auth.readSecretFile(address.path)) : secret;
    await auth.authenticate(channel, { secret: key, role: 'client', timeout: helloTimeout });
  } catch (err) {
    channel.destroy();
    throw err;
  } finally {
    channel.off('error', quiet);
  }
}

module.exports = {
  listen, connect, Server, resolveAddress, channelDirectory,
  // For the backends built on this one (tls.js).
  secretFor, channelOptions, numericHost, authenticateClient, clientSettings, DEFAULT_HELLO_TIMEOUT,
  // Shared with the fallback backend: socket-file identity, the unix/TCP
  // server's state and address.
  inodeOf, unlinkIfSame, SocketServerBase, removeSocketServerFiles, newSocketServer,
};
