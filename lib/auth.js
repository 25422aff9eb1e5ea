'use strict';
// Shared-secret authentication for channels: a mutual HMAC-SHA256
// challenge/response run over a freshly opened Channel before it is handed to
// the application, and helpers for the key file a named-channel server leaves
// next to its socket.
//
// Wire protocol (internal messages, so a peer's 'message' listener never sees
// them; every field is a string so 'json' and 'advanced' channels both work):
//
//   client -> server  { cmd: 'NODE_PROCWIRE_HELLO', v: 2, nonce: <64 hex> }
//   server -> client  { cmd: 'NODE_PROCWIRE_HELLO', v: 2, nonce: <64 hex> }
//   client -> server  { cmd: 'NODE_PROCWIRE_AUTH', mac: <64 hex> }
//   server -> client  { cmd: 'NODE_PROCWIRE_AUTH', mac: <64 hex> }   (only once the client's proof checked out)
//   either, on error  { cmd: 'NODE_PROCWIRE_AUTH_FAIL' }
//
// mac = HMAC-SHA256(secret, 'procwire-auth-v2' | role of sender | sender's
// nonce | receiver's nonce). The secret itself never crosses the wire.
//
// The client proves first: the server sends its own proof only to a client
// that has proved it knows the secret, so a stranger who connects learns no
// value it could test guesses of a weak secret against offline. (Version 1
// had the server prove first; the two versions refuse each other.)
//
// Until the hello completes the channel is a small, bounded state: frames
// over HELLO_MAX_MESSAGE_SIZE bytes close it (the read limit is lowered
// before the first byte is read and restored afterwards), at most
// HELLO_MAX_MESSAGES frames are accepted, and every message goes to the
// hello alone: requests, acknowledgements and user messages before it
// completes fail the handshake (ERR_PROCWIRE_AUTH_REQUIRED).

const crypto = require('crypto');
const fs = require('fs');
const { CMD, DEFAULT_HELLO_TIMEOUT } = require('./protocol');
const { makeError } = require('./errors');

const HELLO = CMD.HELLO;
const AUTH = CMD.AUTH;
const AUTH_FAIL = CMD.AUTH_FAIL;
const VERSION = 2;
const LABEL = 'procwire-auth-v2';
// The largest frame payload accepted before the hello completes. A hello or
// proof is about 120 bytes in either serialization.
const HELLO_MAX_MESSAGE_SIZE = 1024;
// Frames accepted before the hello completes: the hello, the proof, the
// segment capability notice, and some slack.
const HELLO_MAX_MESSAGES = 8;
const CAPABILITIES = CMD.CAPABILITIES;
const NONCE_BYTES = 32;
const MIN_SECRET_BYTES = 16;
const DEFAULT_TIMEOUT = DEFAULT_HELLO_TIMEOUT;
// How long a failing side waits for its AUTH_FAIL notice to reach the kernel
// before it destroys the channel anyway; a peer that stopped reading must not
// hold the failure up.
const FAIL_FLUSH_LIMIT = 200;
// A key file is 64 hex characters; anything much larger is not one of ours,
// and reading it whole would let a hostile file make us allocate freely.
const MAX_SECRET_FILE_BYTES = 4096;
const HEX64 = /^[0-9a-f]{64}$/;

function invalidArg(message) {
  return makeError('ERR_PROCWIRE_INVALID_ARG', message);
}

// A secret given as a string is used as its UTF-8 bytes, so both sides agree
// on the key whatever the text is (the hex text of a key file included).
function toSecretBuffer(value, what) {
  let buf;
  if (typeof value === 'string') buf = Buffer.from(value, 'utf8');
  else if (Buffer.isBuffer(value)) buf = Buffer.from(value);
  else if (value instanceof Uint8Array) buf = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  else throw invalidArg(`${what} must be a string or a Buffer`);
  // Short secrets can be guessed offline from one recorded handshake, so they
  // are refused rather than silently accepted.
  if (buf.length < MIN_SECRET_BYTES) {
    throw invalidArg(`${what} must be at least ${MIN_SECRET_BYTES} bytes long`);
  }
  return buf;
}

// resolveSecret(options, kind) -> Buffer | null. options.secret wins; the
// PROCWIRE_SECRET environment variable is the fallback (so a parent can hand
// the secret to children it spawns); null means no authentication was asked
// for. `kind` names the caller ('listen', 'connect', ...) in error messages.
function resolveSecret(options, kind) {
  const where = kind ? `${kind} options.secret` : 'options.secret';
  if (options !== undefined && options !== null && options.secret !== undefined && options.secret !== null) {
    return toSecretBuffer(options.secret, where);
  }
  const env = process.env.PROCWIRE_SECRET;
  if (typeof env === 'string' && env.length > 0) return toSecretBuffer(env, 'the PROCWIRE_SECRET environment variable');
  return null;
}

function computeMac(secret, senderRole, senderNonce, receiverNonce) {
  // Roles are fixed words and nonces fixed-length hex, and the separators
  // keep the fields apart, so no two different inputs share an encoding.
  return crypto.createHmac('sha256', secret)
    .update(`${LABEL}\0${senderRole}\0${senderNonce}\0${receiverNonce}`)
    .digest();
}

// authenticate(channel, { secret, role, timeout }) -> Promise that resolves
// once the peer has proved it knows the same secret (and we have proved it
// too). On failure the channel is destroyed and the promise rejects.
//
// Call it as soon as the channel exists (in the server's 'channel' handler,
// right after connect() resolves) and before adding a 'message' listener:
// user messages that arrive meanwhile stay in the channel's backlog, and are
// delivered only to a listener added after this resolves.
function authenticate(channel, options) {
  return new Promise((resolve, reject) => {
    if (channel === null || typeof channel !== 'object' || typeof channel.send !== 'function' ||
        typeof channel.on !== 'function') {
      throw invalidArg('channel must be a procwire Channel');
    }
    if (options === null || typeof options !== 'object') throw invalidArg('options must be an object');
    const role = options.role;
    if (role !== 'client' && role !== 'server') throw invalidArg('options.role must be "client" or "server"');
    const timeout = options.timeout === undefined ? DEFAULT_TIMEOUT : options.timeout;
    if (!Number.isInteger(timeout) || timeout < 0 || timeout > 2 ** 31 - 1) {
      throw invalidArg('options.timeout must be an integer number of milliseconds (0: none)');
    }
    const secret = resolveSecret(options, 'authenticate');
    if (secret === null) {
      throw makeError('ERR_PROCWIRE_AUTH_REQUIRED',
        'authentication needs a secret: pass options.secret or set PROCWIRE_SECRET');
    }
    // A listener that already exists would receive the peer's messages before
    // the peer is authenticated, which is what this function is there to stop.
    if (channel.listenerCount('message') > 0) {
      throw invalidArg('authenticate() must run before a \'message\' listener is added to the channel');
    }
    if (channel.closed || channel.connected === false) {
      throw makeError('ERR_PROCWIRE_AUTH_FAILED', 'channel closed before authentication started');
    }

    const peerRole = role === 'client' ? 'server' : 'client';
    const ownNonce = crypto.randomBytes(NONCE_BYTES).toString('hex');
    let peerNonce = null;
    let settled = false;
    let timer = null;
    let frames = 0;
    // Procwire channels route every message to the hello while it runs
    // (channel._gate) and take a lowered read limit; any other object with
    // a Channel's surface is watched through its events instead.
    const gated = typeof channel._setReadLimit === 'function' && '_gate' in channel;
    const restoreLimit = gated ? channel.maxMessageSize : undefined;

    const cleanup = () => {
      settled = true;
      if (timer !== null) clearTimeout(timer);
      if (gated) channel._gate = null;
      channel.off('internalMessage', onInternal);
      channel.off('message', onEarlyMessage);
      channel.off('close', onClose);
    };

    // Destroys the channel with `err` and rejects. With `notify`, the peer is
    // first told the handshake failed, so it reports AUTH_FAILED itself
    // instead of an unexplained close.
    const fail = (err, notify) => {
      if (settled) return;
      cleanup();
      // Until the channel is destroyed (after the AUTH_FAIL notice is
      // flushed), whatever else the peer sent is dropped unread.
      if (gated) channel._gate = () => {};
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        channel.destroy(err);
        reject(err);
      };
      if (notify && !channel.closed) {
        try {
          channel.send({ cmd: AUTH_FAIL }, finish);
          setTimeout(finish, FAIL_FLUSH_LIMIT).unref();
          return;
        } catch {
          // The notice could not be queued; the close alone has to do.
        }
      }
      finish();
    };

    const authFailed = (message, notify = true) => fail(makeError('ERR_PROCWIRE_AUTH_FAILED', message), notify);

    const sendOwnAuth = () => {
      const mac = computeMac(secret, role, ownNonce, peerNonce).toString('hex');
      channel.send({ cmd: AUTH, mac });
    };

    const succeed = () => {
      cleanup();
      // The channel's own limit holds again for what follows the hello.
      if (gated && !channel._setReadLimit(restoreLimit)) {
        // The channel is closing with a framing error; the hello still settles.
        reject(makeError('ERR_PROCWIRE_AUTH_FAILED', 'a frame received during the hello exceeds the read limit'));
        return;
      }
      // Features held back until the peer proved itself (rings) may start.
      if (typeof channel._onHelloDone === 'function') channel._onHelloDone();
      resolve();
    };

    function onInternal(message) {
      if (settled) return;
      try {
        if (message.cmd === HELLO) {
          if (peerNonce !== null) return authFailed('peer sent a second hello');
          if (message.v !== VERSION) return authFailed(`peer speaks authentication version ${message.v}, not ${VERSION}`);
          if (typeof message.nonce !== 'string' || !HEX64.test(message.nonce)) {
            return authFailed('peer sent a malformed nonce');
          }
          // Our own nonce coming back means the peer is reflecting our hello.
          if (message.nonce === ownNonce) return authFailed('peer reflected our nonce');
          peerNonce = message.nonce;
          // The client speaks first; the server answers only once it has the
          // client's nonce, so neither side can miss a hello sent before it
          // started listening. The client proves first, as soon as it has
          // the server's nonce; the server proves only after checking it.
          if (role === 'server') channel.send({ cmd: HELLO, v: VERSION, nonce: ownNonce });
          else sendOwnAuth();
        } else if (message.cmd === AUTH) {
          if (peerNonce === null) return authFailed('peer sent its proof before its hello');
          if (typeof message.mac !== 'string' || !HEX64.test(message.mac)) return authFailed('peer sent a malformed proof');
          const expected = computeMac(secret, peerRole, peerNonce, ownNonce);
          if (!crypto.timingSafeEqual(expected, Buffer.from(message.mac, 'hex'))) {
            return authFailed('peer does not know the shared secret');
          }
          // The server's proof goes only to a client that proved itself;
          // the client has sent its own already, so both are done.
          if (role === 'server') sendOwnAuth();
          succeed();
        } else if (message.cmd === AUTH_FAIL) {
          fail(makeError('ERR_PROCWIRE_AUTH_FAILED', 'peer rejected our authentication (wrong secret?)'), false);
        }
        // Other internal messages (requests, cluster traffic) are not ours to
        // judge; their own listeners see them.
      } catch (err) {
        // send() throws only if the channel broke under us; report it as the
        // handshake failing rather than leaving the promise pending.
        authFailed(`authentication could not proceed: ${err.message}`, false);
      }
    }

    // While this listener exists, user messages reach it instead of the
    // backlog; any user message before the peer's proof is a peer talking
    // without authenticating, and the channel is dropped with its backlog.
    function onEarlyMessage() {
      fail(makeError('ERR_PROCWIRE_AUTH_REQUIRED', 'peer sent a message before authenticating'), true);
    }

    function onClose(reason, err) {
      if (settled) return;
      cleanup();
      reject(makeError('ERR_PROCWIRE_AUTH_FAILED',
        `channel closed before authentication completed (${reason})`, err));
    }

    // Every message before the hello completes comes here (procwire
    // channels): only the hello's own messages and the capability notice
    // are taken, within a small budget; anything else, requests included,
    // is a peer talking before it authenticated.
    function gate(message) {
      if (settled) return;
      if (++frames > HELLO_MAX_MESSAGES) {
        fail(makeError('ERR_PROCWIRE_AUTH_REQUIRED', `peer sent more than ${HELLO_MAX_MESSAGES} frames before authenticating`), true);
        return;
      }
      const cmd = message !== null && typeof message === 'object' ? message.cmd : undefined;
      if (cmd === HELLO || cmd === AUTH || cmd === AUTH_FAIL) {
        onInternal(message);
      } else if (cmd === CAPABILITIES) {
        channel._onInternal(message);
      } else {
        fail(makeError('ERR_PROCWIRE_AUTH_REQUIRED', 'peer sent a message before authenticating'), true);
      }
    }

    if (gated) {
      if (!channel._setReadLimit(Math.min(HELLO_MAX_MESSAGE_SIZE, restoreLimit))) {
        throw makeError('ERR_PROCWIRE_AUTH_FAILED', 'the peer sent an oversized frame before the hello');
      }
      channel._gate = gate;
    }
    channel.on('internalMessage', onInternal);
    channel.on('message', onEarlyMessage);
    channel.on('close', onClose);
    if (timeout > 0) {
      timer = setTimeout(() => {
        fail(makeError('ERR_PROCWIRE_HELLO_TIMEOUT', `peer did not authenticate within ${timeout} ms`), true);
      }, timeout);
    }
    if (role === 'client') {
      try {
        channel.send({ cmd: HELLO, v: VERSION, nonce: ownNonce });
      } catch (err) {
        authFailed(`authentication could not start: ${err.message}`, false);
      }
    }
  });
}

// ---- key files next to unix sockets ----------------------------------------

function validateSocketPath(socketPath) {
  if (typeof socketPath !== 'string' || socketPath.length === 0 || socketPath.includes('\0')) {
    throw invalidArg('socketPath must be a non-empty string without NUL');
  }
}

// secretFileFor(socketPath) -> the key file's path, next to the socket.
function secretFileFor(socketPath) {
  validateSocketPath(socketPath);
  return `${socketPath}.key`;
}

// createSecretFile(socketPath) -> the new secret (64 hex characters).
// The file is created exclusively: if anything already exists at the path (a
// symlink an attacker planted included), this throws EEXIST instead of
// writing through it. Remove a stale file with removeSecretFile() first.
function createSecretFile(socketPath) {
  const file = secretFileFor(socketPath);
  const secret = crypto.randomBytes(32).toString('hex');
  // 'wx' is O_CREAT | O_EXCL | O_WRONLY: the open fails on an existing path
  // and never follows a symlink.
  const fd = fs.openSync(file, 'wx', 0o600);
  try {
    // The umask may have stripped bits from 0600; set the mode exactly.
    fs.fchmodSync(fd, 0o600);
    fs.writeFileSync(fd, `${secret}\n`);
  } catch (err) {
    fs.closeSync(fd);
    try { fs.unlinkSync(file); } catch { /* already gone */ }
    throw err;
  }
  fs.closeSync(fd);
  return secret;
}

// readSecretFile(socketPath) -> the secret string. Refuses a file another
// user could have written or could read: it must be a regular file (not a
// symlink), owned by us, with no group or other permission bits.
function readSecretFile(socketPath) {
  const file = secretFileFor(socketPath);
  let fd;
  try {
    // O_NOFOLLOW refuses a symlink at open time (no check-then-open race);
    // O_NONBLOCK keeps a FIFO planted at the path from blocking the open.
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (err) {
    const why = err.code === 'ELOOP' ? 'it is a symbolic link' : `it cannot be opened (${err.code || err.message})`;
    throw makeError('ERR_PROCWIRE_AUTH_FAILED', `refusing key file ${file}: ${why}`, err);
  }
  try {
    // Checks are made on the open descriptor, so the file checked is the
    // file read even if the path is swapped meanwhile.
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw makeError('ERR_PROCWIRE_AUTH_FAILED', `refusing key file ${file}: not a regular file`);
    if (st.uid !== process.getuid()) {
      throw makeError('ERR_PROCWIRE_AUTH_FAILED',
        `refusing key file ${file}: owned by uid ${st.uid}, not by this process's uid ${process.getuid()}`);
    }
    if ((st.mode & 0o077) !== 0) {
      throw makeError('ERR_PROCWIRE_AUTH_FAILED',
        `refusing key file ${file}: mode ${(st.mode & 0o777).toString(8).padStart(4, '0')} lets other users ` +
        'read or write it; it must be 0600');
    }
    if (st.size > MAX_SECRET_FILE_BYTES) {
      throw makeError('ERR_PROCWIRE_AUTH_FAILED', `refusing key file ${file}: ${st.size} bytes is too large for a key`);
    }
    const secret = fs.readFileSync(fd, 'utf8').trim();
    if (Buffer.byteLength(secret) < MIN_SECRET_BYTES) {
      throw makeError('ERR_PROCWIRE_AUTH_FAILED', `refusing key file ${file}: the key is shorter than ${MIN_SECRET_BYTES} bytes`);
    }
    return secret;
  } finally {
    fs.closeSync(fd);
  }
}

// removeSecretFile(socketPath): removes the key file; a missing one is fine.
function removeSecretFile(socketPath) {
  const file = secretFileFor(socketPath);
  try {
    fs.unlinkSync(file);
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
  }
}

module.exports = {
  authenticate,
  resolveSecret,
  secretFileFor,
  createSecretFile,
  readSecretFile,
  removeSecretFile,
  // Exposed for tests and for the lead's integration, not as public API.
  _internal: {
    HELLO, AUTH, AUTH_FAIL, VERSION, computeMac, DEFAULT_TIMEOUT, HELLO_MAX_MESSAGE_SIZE, HELLO_MAX_MESSAGES,
  },
};
