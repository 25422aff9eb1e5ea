'use strict';
// The Channel of a core NATS channel and the option checks both ends share.

const { Channel } = require('../../channel');
const { invalidArg, validateObject, validateSize } = require('../../validate');
const { DEFAULT_MAX_MESSAGE_SIZE } = require('../../protocol');

const DEFAULT_PREFIX = '_PROCWIRE';
const DEFAULT_QUEUE = 'procwire';
const DEFAULT_HEARTBEAT = 5000;
const RETRYABLE = new Set(['ERR_PROCWIRE_REQUEST_TIMEOUT', 'ERR_PROCWIRE_PEER_UNREACHABLE']);
const DEFAULT_RETRY_DELAY = 100;

// A subject of tokens without wildcards or whitespace.
function validateSubject(value, name, allowEmpty = false) {
  if (value === undefined && allowEmpty) return undefined;
  if (typeof value !== 'string' || value.length === 0 || /[\s*>]/.test(value) ||
      value.startsWith('.') || value.endsWith('.') || value.includes('..')) {
    throw invalidArg(`${name} must be a NATS subject without wildcards or spaces, got ${String(value)}`);
  }
  return value;
}

function abortable(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', done);
      resolve();
    }
    if (signal) signal.addEventListener('abort', done, { once: true });
  });
}

class NatsChannel extends Channel {
  // request(value, { timeout, signal, retries, retryDelay }): as Channel's,
  // plus `retries`: after a timeout (the request or its reply was lost, e.g. a
  // NATS node died) or "peer unreachable" (no subscriber, e.g. while the peer
  // resubscribes), send it again, up to `retries` more times. The responder
  // may then run more than once for one request (at-least-once).
  request(value, options) {
    const opts = validateObject(options, 'options');
    const retries = validateSize(opts.retries, 'retries', 0, 1e6);
    if (retries === 0) return super.request(value, options);
    const retryDelay = validateSize(opts.retryDelay, 'retryDelay', DEFAULT_RETRY_DELAY, 2 ** 31 - 1);
    return (async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await super.request(value, opts);
        } catch (err) {
          if (attempt >= retries || !RETRYABLE.has(err.code) || (opts.signal && opts.signal.aborted)) {
            if (attempt > 0) err.attempts = attempt + 1;
            throw err;
          }
          this.retries = (this.retries || 0) + 1;
          if (err.code === 'ERR_PROCWIRE_PEER_UNREACHABLE') await abortable(retryDelay, opts.signal);
        }
      }
    })();
  }
}

function channelOptions(options, serialization, handle, peer) {
  return {
    serialization,
    maxMessageSize: options.maxMessageSize,
    highWaterMark: options.highWaterMark,
    // Also bounds what is kept for publishing while the client reconnects.
    maxQueuedBytes: options.maxQueuedBytes,
    requestTimeout: options.requestTimeout,
    transport: 'nats',
    peer,
    createHandle: (callbacks) => handle.attach(callbacks),
  };
}

function handleOptions(options, serialization) {
  const heartbeat = validateSize(options.heartbeat, 'heartbeat', DEFAULT_HEARTBEAT, 2 ** 31 - 1);
  return {
    serialization,
    maxMessageSize: validateSize(options.maxMessageSize, 'maxMessageSize', DEFAULT_MAX_MESSAGE_SIZE),
    heartbeat,
    peerTimeout: validateSize(options.peerTimeout, 'peerTimeout', heartbeat * 4, 2 ** 31 - 1),
  };
}

module.exports = {
  NatsChannel, channelOptions, handleOptions, validateSubject, DEFAULT_PREFIX, DEFAULT_QUEUE,
};
