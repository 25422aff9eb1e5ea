'use strict';
// ServerBase: what every listener shares, whatever its transport (native
// unix/TCP sockets, TLS, NATS, the fallback): the set of open channels, the
// 'channel' event, admission after the hello for servers with a secret,
// errors without a listener as warnings, an idempotent close() and the
// `ready` promise listen() returns on the server. A backend's server extends
// it and supplies [kStop]() (release the listening resource) and, when it has
// one, [kRefListener](on); the keys are in ./symbols.js.

const EventEmitter = require('events');
const auth = require('../security');
const { makeError } = require('../errors');
const { invalidArg, validateObject, validateSize } = require('../validate');
const { DEFAULT_HELLO_TIMEOUT } = require('../protocol');
const {
  kAccept, kAdmit, kClosed, kHelloTimeout, kRefListener, kReport, kSecret, kSetupHello, kStop,
} = require('./symbols');

// Connections a server lets wait for their hello at once; past it the one
// that has waited longest is closed (and reported as 'reject'), so a crowd of
// silent peers costs a bounded amount.
const DEFAULT_MAX_PENDING_HELLOS = 128;

class ServerBase extends EventEmitter {
  // The hello's limit on waiting connections, and the channels whose hello
  // is still running, oldest first (set up by [kSetupHello]).
  #maxPendingHellos = 0;
  #pending = null;

  constructor() {
    super();
    this[kClosed] = false;
    this.channels = new Set();
    this[kSecret] = null;
  }

  // A server whose peers must prove a shared secret first (null: none):
  // [kAdmit]() then runs the hello, bounded by options.helloTimeout and
  // options.maxPendingHellos, before the channel is accepted.
  [kSetupHello](secret, options) {
    this[kSecret] = secret;
    this[kHelloTimeout] = validateSize(options.helloTimeout, 'helloTimeout', DEFAULT_HELLO_TIMEOUT, 2 ** 31 - 1);
    this.#maxPendingHellos = validateSize(options.maxPendingHellos, 'maxPendingHellos', DEFAULT_MAX_PENDING_HELLOS,
      2 ** 31 - 1);
    // Channels whose hello is still running, oldest first.
    this.#pending = new Set();
  }

  // Nothing the peer sends is delivered, and the user never sees the
  // channel, until the peer proves it knows the secret.
  [kAdmit](channel) {
    if (this[kSecret] === null) {
      this[kAccept](channel);
      return;
    }
    // At the cap, the connection that has waited longest goes: an honest
    // client finishes its hello in a round trip, so evicting the oldest
    // keeps serving it while silent peers only push each other out.
    if (this.#pending.size >= this.#maxPendingHellos) {
      const oldest = this.#pending.values().next().value;
      this.#pending.delete(oldest);
      oldest.destroy(makeError('ERR_PROCWIRE_HELLO_TIMEOUT',
        `evicted: ${this.#maxPendingHellos} connections were waiting for their hello (maxPendingHellos)`));
    }
    this.#pending.add(channel);
    const quiet = () => {};
    channel.on('error', quiet);
    auth.authenticate(channel, { secret: this[kSecret], role: 'server', timeout: this[kHelloTimeout] }).then(
      () => {
        this.#pending.delete(channel);
        channel.off('error', quiet);
        if (this[kClosed]) channel.destroy(); else this[kAccept](channel);
      },
      (err) => {
        this.#pending.delete(channel);
        channel.destroy();
        this.emit('reject', err);
      });
  }

  // An admitted channel: tracked until it closes, then handed to the user.
  [kAccept](channel) {
    this.channels.add(channel);
    channel.once('close', () => this.channels.delete(channel));
    this.emit('channel', channel);
  }

  // A listener's error nobody listens for must not crash the process.
  [kReport](err) {
    if (this.listenerCount('error') > 0) this.emit('error', err); else process.emitWarning(err);
  }

  // Stops accepting; open channels stay open. Idempotent.
  close(callback) {
    if (this[kClosed]) {
      if (callback) process.nextTick(callback);
      return this;
    }
    this[kClosed] = true;
    this[kStop]();
    process.nextTick(() => {
      this.emit('close');
      if (callback) callback();
    });
    return this;
  }

  [kStop]() {}

  [kRefListener](on) {}

  ref() {
    this[kRefListener](true);
    return this;
  }

  unref() {
    this[kRefListener](false);
    return this;
  }
}

// listen(target[, options][, onChannel]): the options object (validated)
// and the 'channel' listener, the same for every backend.
function listenArguments(options, onChannel) {
  if (typeof options === 'function') {
    onChannel = options;
    options = undefined;
  }
  options = validateObject(options, 'options');
  if (onChannel !== undefined && typeof onChannel !== 'function') throw invalidArg('onChannel must be a function');
  return { options, onChannel };
}

// Sets server.ready: resolves with the server on 'listening', rejects on
// the first 'error' before it (never an unhandled rejection by itself).
function setReady(server) {
  server.ready = new Promise((resolve, reject) => {
    server.once('listening', () => resolve(server));
    server.once('error', reject);
  });
  server.ready.catch(() => {});
  return server;
}

module.exports = { ServerBase, listenArguments, setReady };
