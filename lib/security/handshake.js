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
//
// The handshake is an explicit state machine (Handshake.state):
//   AWAIT_HELLO  nothing from the peer yet (the client has sent its hello)
//   AWAIT_PROOF  the peer's hello is in; its proof is awaited (the client
//                has sent its own proof, the server its hello)
//   DONE         both proved; the channel's limits are back
//   FAILED       settled with an error; the channel is (being) destroyed

const crypto = require('crypto');
const { CMD, DEFAULT_HELLO_TIMEOUT } = require('../protocol');
const { makeError, invalidArg } = require('../errors');
const { kReader, kControl, kSetReadLimit, kHelloDone } = require('../channel/symbols');
const { resolveSecret } = require('./keyfile');

const HELLO = CMD.HELLO;
const AUTH = CMD.AUTH;
const AUTH_FAIL = CMD.AUTH_FAIL;
const CAPABILITIES = CMD.CAPABILITIES;
const VERSION = 2;
const LABEL = 'procwire-auth-v2';
// The largest frame payload accepted before the hello completes. A hello or
// proof is about 120 bytes in either serialization.
const HELLO_MAX_MESSAGE_SIZE = 1024;
// Frames accepted before the hello completes: the hello, the proof, the
// segment capability notice, and some slack.
const HELLO_MAX_MESSAGES = 8;
const NONCE_BYTES = 32;
const DEFAULT_TIMEOUT = DEFAULT_HELLO_TIMEOUT;
// How long a failing side waits for its AUTH_FAIL notice to reach the kernel
// before it destroys the channel anyway; a peer that stopped reading must not
// hold the failure up.
const FAIL_FLUSH_LIMIT = 200;
const HEX64 = /^[0-9a-f]{64}$/;

const AWAIT_HELLO = 'await-hello';
const AWAIT_PROOF = 'await-proof';
const DONE = 'done';
const FAILED = 'failed';

function computeMac(secret, senderRole, senderNonce, receiverNonce) {
  // Roles are fixed words and nonces fixed-length hex, and the separators
  // keep the fields apart, so no two different inputs share an encoding.
  return crypto.createHmac('sha256', secret)
    .update(`${LABEL}\0${senderRole}\0${senderNonce}\0${receiverNonce}`)
    .digest();
}

function timedOut(handshake, timeout) {
  handshake.fail(makeError('ERR_PROCWIRE_HELLO_TIMEOUT', `peer did not authenticate within ${timeout} ms`), true);
}

class Handshake {
  constructor(channel, secret, role, resolve, reject) {
    this.channel = channel;
    this.secret = secret;
    this.role = role;
    this.peerRole = role === 'client' ? 'server' : 'client';
    this.ownNonce = crypto.randomBytes(NONCE_BYTES).toString('hex');
    this.peerNonce = null;
    this.state = AWAIT_HELLO;
    this.resolve = resolve;
    this.reject = reject;
    this.timer = null;
    this.frames = 0;
    // Procwire channels route every message to the hello while it runs
    // (the gate of their Reader) and take a lowered read limit; any other
    // object with a Channel's surface is watched through its events instead.
    this.gated = channel[kReader] !== undefined;
    this.restoreLimit = this.gated ? channel.maxMessageSize : undefined;
    // The listeners, made once.
    this.onInternal = (message) => this.#onInternal(message);
    // While this listener exists, user messages reach it instead of the
    // backlog; any user message before the peer's proof is a peer talking
    // without authenticating, and the channel is dropped with its backlog.
    this.onEarlyMessage = () =>
      this.fail(makeError('ERR_PROCWIRE_AUTH_REQUIRED', 'peer sent a message before authenticating'), true);
    this.onClose = (reason, err) => this.#onClose(reason, err);
    this.gate = (message) => this.#gate(message);
  }

  get settled() {
    return this.state === DONE || this.state === FAILED;
  }

  start(timeout) {
    const channel = this.channel;
    if (this.gated) {
      if (!channel[kSetReadLimit](Math.min(HELLO_MAX_MESSAGE_SIZE, this.restoreLimit))) {
        throw makeError('ERR_PROCWIRE_AUTH_FAILED', 'the peer sent an oversized frame before the hello');
      }
      channel[kReader].gate = this.gate;
    }
    channel.on('internalMessage', this.onInternal);
    channel.on('message', this.onEarlyMessage);
    channel.on('close', this.onClose);
    if (timeout > 0) this.timer = setTimeout(timedOut, timeout, this, timeout);
    if (this.role === 'client') {
      try {
        channel.send({ cmd: HELLO, v: VERSION, nonce: this.ownNonce });
      } catch (err) {
        this.#authFailed(`authentication could not start: ${err.message}`, false);
      }
    }
  }

  #cleanup(state) {
    this.state = state;
    const channel = this.channel;
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.gated) channel[kReader].gate = null;
    channel.off('internalMessage', this.onInternal);
    channel.off('message', this.onEarlyMessage);
    channel.off('close', this.onClose);
  }

  // Destroys the channel with `err` and rejects. With `notify`, the peer is
  // first told the handshake failed, so it reports AUTH_FAILED itself
  // instead of an unexplained close.
  fail(err, notify) {
    if (this.settled) return;
    this.#cleanup(FAILED);
    const channel = this.channel;
    // Until the channel is destroyed (after the AUTH_FAIL notice is
    // flushed), whatever else the peer sent is dropped unread.
    if (this.gated) channel[kReader].gate = () => {};
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      channel.destroy(err);
      this.reject(err);
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
  }

  #authFailed(message, notify = true) {
    this.fail(makeError('ERR_PROCWIRE_AUTH_FAILED', message), notify);
  }

  #sendOwnAuth() {
    const mac = computeMac(this.secret, this.role, this.ownNonce, this.peerNonce).toString('hex');
    this.channel.send({ cmd: AUTH, mac });
  }

  #succeed() {
    this.#cleanup(DONE);
    // The channel's own limit holds again for what follows the hello.
    // The limit cannot be restored when the channel already ended: the hello
    // still settles, so connect() never hangs.
    if (this.gated && !this.channel[kSetReadLimit](this.restoreLimit)) {
      const err = makeError('ERR_PROCWIRE_AUTH_FAILED', 'a frame received during the hello exceeds the read limit');
      this.channel.destroy(err);
      this.reject(err);
      return;
    }
    // Features held back until the peer proved itself (rings) may start.
    if (this.gated) this.channel[kHelloDone]();
    this.resolve();
  }

  #onInternal(message) {
    if (this.settled) return;
    try {
      if (message.cmd === HELLO) this.#onHello(message);
      else if (message.cmd === AUTH) this.#onProof(message);
      else if (message.cmd === AUTH_FAIL) {
        this.fail(makeError('ERR_PROCWIRE_AUTH_FAILED', 'peer rejected our authentication (wrong secret?)'), false);
      }
      // Other internal messages (requests, cluster traffic) are not ours to
      // judge; their own listeners see them.
    } catch (err) {
      // send() throws only if the channel broke under us; report it as the
      // handshake failing rather than leaving the promise pending.
      this.#authFailed(`authentication could not proceed: ${err.message}`, false);
    }
  }

  // AWAIT_HELLO -> AWAIT_PROOF.
  #onHello(message) {
    if (this.state !== AWAIT_HELLO) return this.#authFailed('peer sent a second hello');
    if (message.v !== VERSION) return this.#authFailed(`peer speaks authentication version ${message.v}, not ${VERSION}`);
    if (typeof message.nonce !== 'string' || !HEX64.test(message.nonce)) {
      return this.#authFailed('peer sent a malformed nonce');
    }
    // Our own nonce coming back means the peer is reflecting our hello.
    if (message.nonce === this.ownNonce) return this.#authFailed('peer reflected our nonce');
    this.peerNonce = message.nonce;
    this.state = AWAIT_PROOF;
    // The client speaks first; the server answers only once it has the
    // client's nonce, so neither side can miss a hello sent before it
    // started listening. The client proves first, as soon as it has
    // the server's nonce; the server proves only after checking it.
    if (this.role === 'server') this.channel.send({ cmd: HELLO, v: VERSION, nonce: this.ownNonce });
    else this.#sendOwnAuth();
  }

  // AWAIT_PROOF -> DONE.
  #onProof(message) {
    if (this.state !== AWAIT_PROOF) return this.#authFailed('peer sent its proof before its hello');
    if (typeof message.mac !== 'string' || !HEX64.test(message.mac)) return this.#authFailed('peer sent a malformed proof');
    const expected = computeMac(this.secret, this.peerRole, this.peerNonce, this.ownNonce);
    if (!crypto.timingSafeEqual(expected, Buffer.from(message.mac, 'hex'))) {
      return this.#authFailed('peer does not know the shared secret');
    }
    // The server's proof goes only to a client that proved itself;
    // the client has sent its own already, so both are done.
    if (this.role === 'server') this.#sendOwnAuth();
    this.#succeed();
  }

  #onClose(reason, err) {
    if (this.settled) return;
    this.#cleanup(FAILED);
    this.reject(makeError('ERR_PROCWIRE_AUTH_FAILED',
      `channel closed before authentication completed (${reason})`, err));
  }

  // Every message before the hello completes comes here (procwire
  // channels): only the hello's own messages and the capability notice
  // are taken, within a small budget; anything else, requests included,
  // is a peer talking before it authenticated.
  #gate(message) {
    if (this.settled) return;
    if (++this.frames > HELLO_MAX_MESSAGES) {
      this.fail(makeError('ERR_PROCWIRE_AUTH_REQUIRED',
        `peer sent more than ${HELLO_MAX_MESSAGES} frames before authenticating`), true);
      return;
    }
    const cmd = message !== null && typeof message === 'object' ? message.cmd : undefined;
    if (cmd === HELLO || cmd === AUTH || cmd === AUTH_FAIL) {
      this.#onInternal(message);
    } else if (cmd === CAPABILITIES) {
      this.channel[kControl].onMessage(message);
    } else {
      this.onEarlyMessage();
    }
  }
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

    new Handshake(channel, secret, role, resolve, reject).start(timeout);
  });
}

module.exports = {
  authenticate,
  // The hello's wire: its message names, version, MAC and limits (the tests
  // speak it to check refusals a real peer never sends).
  helloWire: {
    HELLO, AUTH, AUTH_FAIL, VERSION, computeMac, DEFAULT_TIMEOUT, HELLO_MAX_MESSAGE_SIZE, HELLO_MAX_MESSAGES,
  },
};
