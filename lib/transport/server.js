'use strict';
// ServerBase: what every listener shares, whatever its transport (native
// unix/TCP sockets, TLS, NATS): the set of open channels, the 'channel'
// event, errors without a listener as warnings, an idempotent close() and
// the `ready` promise listen() returns on the server. A backend's server
// extends it and supplies _stop() (release the listening resource) and,
// when it has one, _refListener(on).

const EventEmitter = require('events');
const { invalidArg, validateObject } = require('../validate');

class ServerBase extends EventEmitter {
  constructor() {
    super();
    this._closed = false;
    this.channels = new Set();
  }

  // An admitted channel: tracked until it closes, then handed to the user.
  _accept(channel) {
    this.channels.add(channel);
    channel.once('close', () => this.channels.delete(channel));
    this.emit('channel', channel);
  }

  // A listener's error nobody listens for must not crash the process.
  _report(err) {
    if (this.listenerCount('error') > 0) this.emit('error', err); else process.emitWarning(err);
  }

  // Stops accepting; open channels stay open. Idempotent.
  close(callback) {
    if (this._closed) {
      if (callback) process.nextTick(callback);
      return this;
    }
    this._closed = true;
    this._stop();
    process.nextTick(() => {
      this.emit('close');
      if (callback) callback();
    });
    return this;
  }

  _stop() {}

  _refListener(on) {}

  ref() {
    this._refListener(true);
    return this;
  }

  unref() {
    this._refListener(false);
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
