'use strict';
// Request/reply over a Channel. RequestTable: this end's requests in
// flight (ids, timeouts, AbortSignal, the peer's errors). Responder: the
// peer's requests to this end (the handler, the concurrency cap, the queue
// of waiting ones and its read hold, the one turn a request waits for a
// responder). serializeError is the only copy in lib/.

const { makeError } = require('../errors');
const { invalidArg, validateObject, validateSize } = require('../validate');
const { CMD } = require('../protocol');
const { withCallerFrames, timeoutMessage } = require('../error-context');
const { MAX_TIMEOUT, MAX_WAITING_REQUESTS } = require('./settings');
const { HOLD_REQUESTS } = require('./reader');
const { kPhase, kWriter, kReader, kApplyRefPolicy } = require('./symbols');
const { retriesOf, requestWithRetries } = require('./request-retry');

// An error as it crosses to the peer: its name, message, code and stack.
// A thrown object that is not an Error gives what it has of them (a pool
// task may throw { message, code }); anything else is the message.
function serializeError(err) {
  try {
    return describeError(err);
  } catch {
    return { name: 'Error', message: 'a thrown value that cannot be described (no prototype, or a revoked proxy)' };
  }
}

function describeError(err) {
  if (err instanceof Error) {
    return { name: err.name, message: err.message, code: err.code, stack: err.stack };
  }
  if (err !== null && typeof err === 'object') {
    return {
      name: String(err.name || 'Error'),
      message: String(err.message === undefined ? err : err.message),
      code: err.code === undefined ? undefined : String(err.code),
      stack: typeof err.stack === 'string' ? err.stack : undefined,
    };
  }
  return { name: 'Error', message: String(err) };
}

// A request timer this late (ms) fired after a blocked loop: replies already
// received by the kernel are read before the request is called timed out.
const LATE_LOOP_MS = 20;

function settleTimedOut(table, id, timeout, loopDelay) {
  const err = makeError('ERR_PROCWIRE_REQUEST_TIMEOUT', timeoutMessage(table.host, timeout) +
    (loopDelay >= LATE_LOOP_MS ? ` (this process's event loop was ${loopDelay} ms late)` : ''));
  err.loopDelay = loopDelay;
  table.settle(id, err);
}

// One more full turn of the loop (its idle, poll and check phases) before a
// late request is called timed out: an immediate queued from an immediate
// runs in the next turn's check phase.
function settleAfterNextTurn(table, id, timeout, loopDelay) {
  setImmediate(settleTimedOut, table, id, timeout, loopDelay);
}

// A timer that fires late means this process's loop was blocked; a reply
// that came meanwhile waits unread in the socket or the ring, and is read
// in this loop turn's poll phase, or in the next turn when a ring reader
// that was spinning notices it there. Only then is the peer called silent;
// the error's loopDelay tells a late loop from a dead peer.
function timeoutRequest(table, id, timeout, deadline) {
  const loopDelay = Math.max(0, Date.now() - deadline);
  if (loopDelay >= LATE_LOOP_MS) setImmediate(settleAfterNextTurn, table, id, timeout, loopDelay);
  else settleTimedOut(table, id, timeout, loopDelay);
}

class RequestTable {
  // From the handle's capabilities: `requests`, the handle carries
  // request/reply itself (otherwise requests are NODE_PROCWIRE_REQ
  // messages); `retries`, a request may be lost while the channel stays
  // open, so options.retries resends it (request-retry.js).
  constructor(host, caps) {
    this.host = host;
    this.nativeRequests = caps.requests;
    this.retryable = caps.retries;
    this.entries = new Map();
    this.nextId = 1;
    // Requests sent again under the retry policy, on this channel.
    this.retries = 0;
  }

  get size() {
    return this.entries.size;
  }

  // request(value, { timeout, signal[, retries, retryDelay] }) -> Promise
  // of the peer's reply. refed: whether the channel keeps the process alive
  // (a timer of an unrefed channel must not).
  open(value, options, refed) {
    if (this.retryable) {
      options = validateObject(options, 'options');
      const retries = retriesOf(options);
      if (retries > 0) return requestWithRetries(this, value, options, refed, retries);
    }
    return this.attempt(value, options, refed);
  }

  // One request sent once.
  attempt(value, options, refed) {
    const host = this.host;
    options = validateObject(options, 'options');
    const timeout = validateSize(options.timeout, 'timeout', host.requestTimeout, MAX_TIMEOUT);
    const signal = options.signal;
    if (signal !== undefined && (signal === null || typeof signal.aborted !== 'boolean')) {
      throw invalidArg('options.signal must be an AbortSignal');
    }
    if (signal && signal.aborted) {
      return Promise.reject(makeError('ERR_PROCWIRE_REQUEST_ABORTED', 'request aborted', signal.reason));
    }
    if (host[kPhase] !== 'open' && host[kPhase] !== 'connecting') {
      return Promise.reject(makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'channel closed'));
    }
    const id = this.nextId++;
    // A rejection's stack gains the awaiting caller's frames (error-context.js).
    return withCallerFrames(new Promise((resolve, reject) => {
      const entry = { resolve, reject, timer: null, signal, onAbort: null };
      if (timeout > 0) {
        entry.timer = setTimeout(timeoutRequest, timeout, this, id, timeout, Date.now() + timeout);
        // A pending timer must not be what keeps a process alive on its own;
        // the channel's own ref decides that.
        if (!refed) entry.timer.unref();
      }
      if (signal) {
        entry.onAbort = () => this.settle(id,
          makeError('ERR_PROCWIRE_REQUEST_ABORTED', 'request aborted', signal.reason));
        signal.addEventListener('abort', entry.onAbort, { once: true });
      }
      this.entries.set(id, entry);
      try {
        if (this.nativeRequests) host[kWriter].sendRequest(id, value);
        else host.send({ cmd: CMD.REQUEST, id, body: value });
      } catch (err) {
        this.settle(id, err);
      }
    }));
  }

  // The peer's reply: ok with its body, or not with its responder's error
  // ({ name, message, code, stack }).
  onResponse(id, ok, bodyOrError) {
    if (!this.entries.has(id)) return;  // timed out or aborted already
    if (ok) {
      this.settle(id, null, bodyOrError);
      return;
    }
    const remote = bodyOrError || {};
    if (remote.code === 'ERR_PROCWIRE_NO_RESPONDER') {
      this.settle(id, makeError('ERR_PROCWIRE_NO_RESPONDER', 'peer has no responder'));
      return;
    }
    this.settle(id, makeError('ERR_PROCWIRE_REMOTE_ERROR',
      `peer's responder failed: ${remote.message}`, undefined, { remote }));
  }

  settle(id, err, value) {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.entries.delete(id);
    if (entry.timer) clearTimeout(entry.timer);
    if (entry.onAbort) entry.signal.removeEventListener('abort', entry.onAbort);
    if (err) entry.reject(err); else entry.resolve(value);
    this.host[kApplyRefPolicy](true);
  }

  // The ids of the requests in flight, at close.
  ids() {
    return [...this.entries.keys()];
  }
}

function refuseUnanswered(responder) {
  responder.refuseUnanswered();
}

class Responder {
  constructor(host) {
    this.host = host;
    this.handler = null;
    this.answering = 0;
    this.waiting = [];
    this.unanswered = [];  // requests that came before any handler, for one turn
  }

  set(handler) {
    this.handler = handler;
    if (handler !== null && this.unanswered.length > 0) {
      const held = this.unanswered;
      this.unanswered = [];
      for (const message of held) this.onRequest(message);
    }
  }

  // Requests beyond maxConcurrentRequests wait in order; a long queue of
  // waiting ones pauses reading until it shrinks.
  onRequest(message) {
    if (this.answering >= this.host.maxConcurrentRequests) {
      this.waiting.push(message);
      const reader = this.host[kReader];
      if (this.waiting.length >= MAX_WAITING_REQUESTS && !reader.isHeld(HOLD_REQUESTS)) reader.hold(HOLD_REQUESTS);
      return;
    }
    this.#answer(message);
  }

  #done() {
    const host = this.host;
    this.answering--;
    while (this.answering < host.maxConcurrentRequests && this.waiting.length > 0 && host[kPhase] !== 'closed') {
      this.#answer(this.waiting.shift());
    }
    const reader = host[kReader];
    if (reader.isHeld(HOLD_REQUESTS) && this.waiting.length < MAX_WAITING_REQUESTS / 2) reader.release(HOLD_REQUESTS);
  }

  #answer(message) {
    const id = message.id;
    if (this.handler === null) {
      // A request can arrive in the same read as the hello that admits the
      // channel, before the user's 'channel' handler (or the code after
      // `await connect()`) has called respond(): give it one turn of the
      // event loop before answering that there is no responder.
      this.unanswered.push(message);
      if (this.unanswered.length === 1) setImmediate(refuseUnanswered, this);
      return;
    }
    const host = this.host;
    const writer = host[kWriter];
    let result;
    this.answering++;
    try {
      result = this.handler(message.body, host);
    } catch (err) {
      result = Promise.reject(err);
    }
    Promise.resolve(result).then(
      (body) => {
        try {
          writer.sendResponse(id, true, body, true);
        } catch (err) {
          // The reply itself could not be encoded: tell the requester.
          writer.sendResponse(id, false, serializeError(err));
        }
      },
      (err) => writer.sendResponse(id, false, serializeError(err)))
      .finally(() => this.#done());
  }

  refuseUnanswered() {
    const held = this.unanswered;
    this.unanswered = [];
    const writer = this.host[kWriter];
    for (const { id } of held) {
      writer.sendResponse(id, false,
        { name: 'NoResponderError', message: 'no responder', code: 'ERR_PROCWIRE_NO_RESPONDER' });
    }
  }
}

module.exports = { RequestTable, Responder, serializeError };
