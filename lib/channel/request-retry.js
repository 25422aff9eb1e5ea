'use strict';
// The request table's retry policy (requests.js), on for a handle that
// declares capability `retries` (lib/transport/contract.js): its requests,
// or their replies, can be lost while the channel stays open, as on core
// NATS when a server dies or the peer resubscribes after a failover. There
// request(value, { retries, retryDelay }) sends a request again after a
// timeout or "peer unreachable", up to `retries` more times, so the
// responder may run more than once for one request (at-least-once). Other
// backends lose nothing without closing the channel, so they ignore it.

const { validateSize } = require('../validate');

// The failures after which the request may simply not have arrived.
const RETRYABLE = new Set(['ERR_PROCWIRE_REQUEST_TIMEOUT', 'ERR_PROCWIRE_PEER_UNREACHABLE']);
// How long to wait after "peer unreachable" (nobody subscribed yet) before
// the next attempt; a timeout has waited already.
const DEFAULT_RETRY_DELAY = 100;
const MAX_RETRIES = 1e6;

// Resolves after ms, or at once when signal aborts.
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

// options.retries, checked (0: send once).
function retriesOf(options) {
  return validateSize(options.retries, 'retries', 0, MAX_RETRIES);
}

// Runs table.attempt() up to retries + 1 times. The final error says how
// many times the request was sent (err.attempts); table.retries counts
// every resend on this channel.
async function requestWithRetries(table, value, options, refed, retries) {
  const retryDelay = validateSize(options.retryDelay, 'retryDelay', DEFAULT_RETRY_DELAY, 2 ** 31 - 1);
  const signal = options.signal;
  for (let attempt = 0; ; attempt++) {
    try {
      return await table.attempt(value, options, refed);
    } catch (err) {
      if (attempt >= retries || !RETRYABLE.has(err.code) || (signal && signal.aborted)) {
        if (attempt > 0) err.attempts = attempt + 1;
        throw err;
      }
      table.retries++;
      if (err.code === 'ERR_PROCWIRE_PEER_UNREACHABLE') await abortable(retryDelay, signal);
    }
  }
}

module.exports = { retriesOf, requestWithRetries };
