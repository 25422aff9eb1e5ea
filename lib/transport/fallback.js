'use strict';
// The pure-JavaScript backend: named unix channels and TCP on `net` sockets,
// each channel a StreamHandle (./stream.js) with the JS codec and framer
// (lib/fallback/), so the bytes on the wire are the addon's. lib/transport/
// index.js chooses it in place of ./socket.js when the addon is not loaded.
//
// What differs from the native socket backend, and why:
//   - listen() binds asynchronously (net.Server.listen reports its errors on
//     a later tick), so the server emits 'listening' or 'error' and
//     server.ready resolves or rejects, as TLS listeners do;
//   - no SO_PEERCRED in JavaScript: the socket file's 0600 mode (inside the
//     0700 channel directory for named channels) is what admits only this
//     user; an explicit allowUids list cannot be checked, so it refuses
//     every peer rather than admit one it cannot verify;
//   - no descriptor passing: no shared-memory segments and no handles.

const fs = require('fs');
const net = require('net');
const path = require('path');
const crypto = require('crypto');
const { Channel } = require('../channel');
const { makeError, systemError } = require('../errors');
const { withAddress } = require('../error-context');
const auth = require('../security');
const { JsStreamHandle } = require('../fallback/binding');
const { setReady } = require('./server');
const {
  channelOptions, numericHost, authenticateClient, clientSettings, inodeOf,
  SocketServerBase, removeSocketServerFiles, newSocketServer,
} = require('./socket');
const {
  kAddress, kAdmit, kAllowedUids, kBoundPort, kClosed, kHost, kKeyFile, kKeyIno, kListen, kListener, kOptions,
  kRefListener, kReport, kSecret, kSocketIno, kStop,
} = require('./symbols');

const MAX_UNIX_PATH = 107;

// A channel over a connected net.Socket, with the JS codec and framer.
function streamHandle(socket, callbacks, options) {
  return new JsStreamHandle(socket, callbacks, options);
}

// The errno name of a Node system error, for systemError().
function errnoNameOf(err) {
  return err && typeof err.code === 'string' && /^E[A-Z0-9]+$/.test(err.code) ? err.code : 'EIO';
}

function tooLong(file) {
  const n = Buffer.byteLength(file);
  return n === 0 || n > MAX_UNIX_PATH;
}

// Resolves once `server` listens, rejects with its error.
function listenOn(server, options) {
  return new Promise((resolve, reject) => {
    const onError = (err) => reject(err);
    server.once('error', onError);
    server.listen(options, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

// Whether someone accepts on a unix socket file: true, or false when the
// connection is refused (a file left by a process that died).
function probeUnix(file) {
  return new Promise((resolve) => {
    const s = net.connect({ path: file });
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', (err) => resolve(err.code !== 'ECONNREFUSED'));
  });
}

// A unix/TCP server on net.Server: the same state, hello and admission as
// the native one (socket.js), its own I/O.
class FallbackServer extends SocketServerBase {
  // unref() came before the net.Server was made.
  #unrefed = false;

  // Binds the net.Server; rejects with a coded ERR_PROCWIRE_LISTEN_FAILED.
  async [kListen](host) {
    const a = this[kAddress];
    const backlog = this[kOptions].backlog || 511;
    const srv = net.createServer({ allowHalfOpen: true }, (socket) => this.#onSocket(socket));
    try {
      if (a.kind === 'tcp') {
        await listenOn(srv, { host, port: a.port, backlog });
        this[kHost] = host;
        this[kBoundPort] = srv.address().port;
      } else if (a.abstract) {
        if (tooLong(a.path)) throw Object.assign(new Error('name too long'), { code: 'ENAMETOOLONG' });
        await listenOn(srv, { path: `\0${a.path}`, backlog });
      } else {
        await this.#bindUnixFile(srv, a.path, backlog);
      }
    } catch (err) {
      srv.close();
      throw systemError('ERR_PROCWIRE_LISTEN_FAILED', errnoNameOf(err), 'listen', a.kind === 'tcp' ? `${host}:${a.port}` : a.path);
    }
    srv.on('error', (err) => this[kReport](makeError('ERR_PROCWIRE_SOCKET', err.message, err)));
    this[kListener] = srv;
    if (this.#unrefed) srv.unref();
    if (a.kind === 'unix' && !a.abstract && this[kOptions].auth !== false && this[kSecret] === null) {
      try {
        auth.removeSecretFile(a.path);
        this[kSecret] = Buffer.from(auth.createSecretFile(a.path));
        this[kKeyFile] = auth.secretFileFor(a.path);
        this[kKeyIno] = inodeOf(this[kKeyFile]);
      } catch (err) {
        this[kStop]();
        throw makeError('ERR_PROCWIRE_LISTEN_FAILED', `cannot create key file: ${err.message}`, err);
      }
    }
  }

  // The socket is bound in a fresh 0700 directory beside its name, made
  // 0600, then hard-linked to its name: no moment with open permissions and
  // no process-wide umask change, and an existing file is never replaced
  // unless it is a socket nobody accepts on.
  async #bindUnixFile(srv, file, backlog) {
    if (tooLong(file)) throw Object.assign(new Error('path too long'), { code: 'ENAMETOOLONG' });
    const dir = fs.mkdtempSync(path.join(path.dirname(file), `.pw${crypto.randomBytes(3).toString('hex')}`));
    const tmp = path.join(dir, 's');
    try {
      if (tooLong(tmp)) {
        // No room for a temporary name: bind in place, inside a directory
        // that is already private for named channels.
        if (fs.existsSync(file) && !(await this.#replaceStale(file))) {
          throw Object.assign(new Error('address in use'), { code: 'EADDRINUSE' });
        }
        await listenOn(srv, { path: file, backlog });
        fs.chmodSync(file, 0o600);
      } else {
        await listenOn(srv, { path: tmp, backlog });
        fs.chmodSync(tmp, 0o600);
        try {
          fs.linkSync(tmp, file);
        } catch (err) {
          if (err.code !== 'EEXIST' || !(await this.#replaceStale(file))) {
            throw Object.assign(new Error('address in use'), { code: err.code === 'EEXIST' ? 'EADDRINUSE' : err.code });
          }
          fs.linkSync(tmp, file);
        }
        fs.unlinkSync(tmp);
      }
    } finally {
      try { fs.unlinkSync(tmp); } catch { /* linked and removed, or never bound */ }
      try { fs.rmdirSync(dir); } catch { /* gone */ }
    }
    // Remembered so close() removes this server's file only.
    this[kSocketIno] = inodeOf(file);
  }

  // A socket file nobody accepts on is removed (true); anything else stays.
  async #replaceStale(file) {
    let isSocket;
    try { isSocket = fs.lstatSync(file).isSocket(); } catch { return true; }
    if (!isSocket || await probeUnix(file)) return false;
    try { fs.unlinkSync(file); } catch { /* gone meanwhile */ }
    return true;
  }

  #onSocket(socket) {
    if (this[kClosed]) {
      socket.destroy();
      return;
    }
    const a = this[kAddress];
    let peer = null;
    if (a.kind === 'tcp') {
      socket.setNoDelay(true);
      peer = { address: socket.remoteAddress, port: socket.remotePort };
    } else if (this[kOptions].allowUids !== undefined && this[kAllowedUids] !== '*') {
      // An allow-list needs the peer's uid, which JavaScript cannot read.
      socket.destroy();
      this.emit('reject', makeError('ERR_PROCWIRE_PEER_REJECTED',
        'peer uid cannot be checked without the native addon (allowUids)', undefined, { peer: null }));
      return;
    }
    this[kAdmit](new Channel(null, {
      ...channelOptions(this[kOptions], a), transport: a.kind, peer,
      createHandle: (callbacks, o) => streamHandle(socket, callbacks, o),
    }));
  }

  [kStop]() {
    const srv = this[kListener];
    this[kListener] = null;
    if (srv) srv.close();
    removeSocketServerFiles(this, Boolean(srv));
  }

  [kRefListener](on) {
    this.#unrefed = !on;
    super[kRefListener](on);
  }
}

// listen(address[, options][, onChannel]) -> Server, bound asynchronously:
// 'listening' or 'error' (ERR_PROCWIRE_LISTEN_FAILED) follows, and
// server.ready settles with it.
function listen(target, options, onChannel) {
  const server = newSocketServer(FallbackServer, target, options, onChannel);
  const address = server[kAddress];
  const host = address.kind === 'tcp' ? numericHost(address.host) : Promise.resolve(undefined);
  host.then((h) => server[kClosed] ? undefined : server[kListen](h).then(() => {
    // Closed while binding: release what was just bound.
    if (server[kClosed]) server[kStop](); else server.emit('listening');
  })).catch((err) => server.emit('error', err.code === 'ERR_PROCWIRE_LISTEN_FAILED'
    ? err : makeError('ERR_PROCWIRE_LISTEN_FAILED', err.message, err)));
  return setReady(server);
}

// connect(address[, options]) -> Promise<Channel>, once connected and
// authenticated.
async function connect(target, options) {
  let address, secret, helloTimeout;
  ({ options, address, secret, helloTimeout } = clientSettings(target, options));
  let where;
  let netOptions;
  if (address.kind === 'tcp') {
    const host = await numericHost(address.host);
    where = `${host}:${address.port}`;
    netOptions = { host, port: address.port };
  } else {
    where = address.path;
    if (tooLong(address.path)) throw systemError('ERR_PROCWIRE_CONNECT_FAILED', 'ENAMETOOLONG', 'connect', where);
    netOptions = { path: address.abstract ? `\0${address.path}` : address.path };
  }
  const socket = net.connect({ ...netOptions, allowHalfOpen: true });
  await new Promise((resolve, reject) => {
    const onError = (err) => {
      socket.destroy();
      reject(withAddress(systemError('ERR_PROCWIRE_CONNECT_FAILED', errnoNameOf(err), 'connect', where), address, where));
    };
    socket.once('error', onError);
    socket.once('connect', () => {
      socket.off('error', onError);
      resolve();
    });
  });
  if (address.kind === 'tcp') socket.setNoDelay(true);
  const channel = new Channel(null, {
    ...channelOptions(options, address), transport: address.kind,
    createHandle: (callbacks, o) => streamHandle(socket, callbacks, o),
  });
  await authenticateClient(channel, secret, address, helloTimeout);
  return channel;
}

module.exports = { listen, connect, FallbackServer, streamHandle };
