'use strict';
// The handles of durable NATS channels (./durable.js): a caller's, which
// publishes requests into the JetStream work queue and reads its replies
// from its own consumer, and a worker's, which takes requests from the
// queue's shared consumer and publishes each reply before it acks the
// request. Both keep Channel's handle contract (../contract.js) with the
// `requests` capability; plain messages have no place in a work queue.

const codecs = require('../../codec');
const { makeError } = require('../../errors');
const { invalidArg } = require('../../validate');
const { NATS_ERROR_HEADER } = require('../../protocol');
const { capabilities, END_REASONS } = require('../contract');
const { HISTOGRAM_BUCKETS, countedStats, sizeBucket } = require('../../stats');
const { serializeError, encodePayload, decodePayload, deliverReply } = require('./handle');
const { replySubject } = require('./queue');

const CAPABILITIES = capabilities({ requests: true });
const ID_HEADER = 'Procwire-Id';
const CALLER_HEADER = 'Procwire-Caller';
const PUBLISH_TIMEOUT = 5000;
const MAX_BACKOFF = 1000;
// How long a pull (a worker's for requests, a caller's for replies) waits
// at the server before it expires and is made again. Short, because a pull
// the server dropped unanswered (one sent while several workers were
// making the shared consumer on a cluster, or through a server that died)
// is noticed only when it should have expired: with the clients' default
// of 30 s, that worker idled for 30 s while the others took every request.
const PULL_EXPIRES = 5000;
// Pulls one worker keeps open at once; a further pull asks for at least
// its concurrency / MAX_PULLS requests, so that under load pulls are few
// and large.
const MAX_PULLS = 4;
// Pull failures that need no word to the user: the pull is made again.
const TRANSIENT_PULL = /heartbeats? missed|leadership|exceeded|no responders|timeout|closed|draining|disconnect/i;
// Ids of answered requests a caller remembers, to tell a duplicate reply
// from one for a request that timed out.
const REMEMBERED_ANSWERS = 1 << 16;

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms).unref(); });

function nak(m) {
  try { m.nak(); } catch { /* connection gone: redelivered after ackWait */ }
}

function stop(messages) {
  try { messages.stop(); } catch { /* stopped */ }
}

class DurableHandleBase {
  constructor(link, settings, options) {
    this._link = link;
    this._nc = link.nc;
    this._js = link.jetstream();
    this._settings = settings;
    this._codec = codecs[options.serialization];
    this._maxMessageSize = options.maxMessageSize;
    this.capabilities = CAPABILITIES;
    this._cb = null;
    this._closed = false;
    this._reading = true;
    this._pushed = 0;
    this._written = 0;
    this._counts = { messagesIn: 0, messagesOut: 0, bytesIn: 0, bytesOut: 0, writeCalls: 0, readCalls: 0, decodeErrors: 0 };
    this._histIn = new Array(HISTOGRAM_BUCKETS).fill(0);
    this._histOut = new Array(HISTOGRAM_BUCKETS).fill(0);
    // What the durable mode adds to stats() (DurableChannel.stats()).
    this.durableStats = { redeliveries: 0, duplicatesSuppressed: 0, lateReplies: 0, republished: 0, progressAcks: 0, cancelled: 0 };
    link.handles.add(this);
    link.acquire();
  }

  attach(callbacks) {
    this._cb = callbacks;
    return this;
  }

  write() {
    throw invalidArg('durable NATS channels carry requests only: use request() and respond()');
  }

  writeBuffer() {
    return this.write();
  }

  flush() {
    return this._written;
  }

  written() {
    return this._written;
  }

  readStart() {
    this._reading = true;
  }

  readStop() {
    this._reading = false;
  }

  // The NATS client keeps its own socket and timers.
  ref() {}

  unref() {}

  stats() {
    return countedStats(this._counts, {
      bytesOut: this._counts.bytesOut,
      queuedBytes: this._pushed - this._written,
      bufferedBytes: 0,
      histogramIn: this._histIn,
      histogramOut: this._histOut,
    });
  }

  onStatus(status) {
    if (this._cb !== null) this._cb.onstatus(status);
  }

  onLinkClosed() {
    if (this._closed) return;
    if (this._cb === null) {
      this.close();
      return;
    }
    this._cb.onend(END_REASONS.END_OF_STREAM, makeError('ERR_PROCWIRE_NATS', 'NATS connection closed'));
  }

  close() {
    if (this._closed) return;
    this._closed = true;
    this._stopConsuming();
    this._link.handles.delete(this);
    this._link.release();
  }

  _stopConsuming() {
    if (this._messages) {
      try { this._messages.stop(); } catch { /* stopped */ }
    }
  }

  _encode(value) {
    return encodePayload(this._codec, this._nc, value);
  }

  _decode(data) {
    return decodePayload(this._codec, data, this._maxMessageSize);
  }

  _countOut(n) {
    this._pushed += n;
    this._counts.messagesOut++;
    this._counts.bytesOut += n;
    this._counts.writeCalls++;
    this._histOut[sizeBucket(n)]++;
  }

  _countIn(n) {
    this._counts.messagesIn++;
    this._counts.readCalls++;
    this._counts.bytesIn += n;
    this._histIn[sizeBucket(n)]++;
  }

  _wrote(n) {
    this._written += n;
    if (this._cb !== null && !this._closed) this._cb.onwrite(this._written);
  }

  // Publishes into the stream until JetStream acknowledges it, the same
  // message id every time, so a publish whose acknowledgement was lost (a
  // server died) and is tried again is stored once. -> the PubAck, or null
  // when `abandoned()` says to stop.
  async _publish(subject, payload, options, abandoned) {
    for (let attempt = 0; ; attempt++) {
      if (this._closed || abandoned()) return null;
      try {
        return await this._js.publish(subject, payload, { ...options, timeout: PUBLISH_TIMEOUT });
      } catch (err) {
        if (this._closed || abandoned()) return null;
        if (err && /maximum payload|max_payload/i.test(String(err.message))) throw err;
        this.durableStats.republished++;
        await sleep(Math.min(MAX_BACKOFF, 25 * 2 ** Math.min(attempt, 6)));
      }
    }
  }

  // Runs `each` over the consumer's messages, at most `limit` at once,
  // pulling again after the iterator ends (a consumer whose server went
  // away) until the handle closes. (The caller's replies; a worker pulls
  // its own way.) Its pulls expire as a worker's do: a pull lost with a
  // server that died held up the caller's replies until the client noticed,
  // up to 30 s later.
  async _consume(consumer, limit, each) {
    while (!this._closed) {
      try {
        this._messages = await consumer.consume({ max_messages: limit, expires: PULL_EXPIRES });
        if (this._closed) this._stopConsuming();
        for await (const m of this._messages) {
          await each(m);
          if (this._closed) break;
        }
      } catch (err) {
        if (this._closed) return;
        if (this._cb !== null) this._cb.onerror(makeError('ERR_PROCWIRE_NATS', `JetStream consumer failed: ${err.message}`, err));
      }
      if (!this._closed) await sleep(200);
    }
  }
}

// ---- the caller ---------------------------------------------------------------

class CallerHandle extends DurableHandleBase {
  constructor(link, settings, options, caller) {
    super(link, settings, options);
    this._caller = caller;
    this._open = new Map();        // request id -> { seq } while unanswered
    this._answered = new Set();    // recently answered ids
    this.lastRequestId = 0;
  }

  start(consumer) {
    this._consume(consumer, 256, (m) => this._onReply(m));
  }

  writeRequest(id, body) {
    const payload = this._encode(body);
    const n = payload.length;
    this.lastRequestId = id;
    const entry = { seq: 0 };
    this._open.set(id, entry);
    this._countOut(n);
    const h = this._link.client.headers();
    h.set(ID_HEADER, String(id));
    h.set(CALLER_HEADER, this._caller);
    this._publish(this._settings.requests, payload, { msgID: `${this._caller}.${id}`, headers: h },
      () => !this._open.has(id)).then((ack) => {
      if (ack) entry.seq = ack.seq;
      this._wrote(n);
      // Cancelled meanwhile: take it back out of the queue if no worker has it.
      if (ack && !this._open.has(id)) this._unqueue(ack.seq);
    }, (err) => {
      this._wrote(n);
      if (this._open.delete(id) && this._cb !== null) this._cb.onrequestfailed(id, makeError('ERR_PROCWIRE_NATS', `JetStream publish failed: ${err.message}`, err));
    });
    return this._pushed;
  }

  writeResponse() {
    return this._pushed;
  }

  // The request timed out or was aborted: its reply, if one still comes, is
  // dropped; if no worker has taken it yet it leaves the queue.
  cancel(id) {
    const entry = this._open.get(id);
    if (entry === undefined) return;
    this._open.delete(id);
    this.durableStats.cancelled++;
    if (entry.seq > 0) this._unqueue(entry.seq);
  }

  _unqueue(seq) {
    this._link.jetstreamManager().then((jsm) => jsm.streams.deleteMessage(this._settings.stream, seq, false))
      .catch(() => { /* taken by a worker already, or the stream is busy */ });
  }

  _onReply(m) {
    const h = m.headers;
    const id = h ? Number(h.get(ID_HEADER)) : NaN;
    this._countIn(m.data.length);
    m.ack();
    if (this._closed || this._cb === null) return;
    if (!this._open.has(id)) {
      if (this._answered.has(id)) this.durableStats.duplicatesSuppressed++;
      else this.durableStats.lateReplies++;
      return;
    }
    this._open.delete(id);
    this._answered.add(id);
    if (this._answered.size > REMEMBERED_ANSWERS) this._answered.delete(this._answered.values().next().value);
    deliverReply(this._cb, this._counts, this._codec, this._maxMessageSize, id, m.data, Boolean(h.get(NATS_ERROR_HEADER)));
  }
}

// ---- the worker -----------------------------------------------------------------

class WorkerHandle extends DurableHandleBase {
  constructor(link, settings, options) {
    super(link, settings, options);
    this._inbound = new Map();     // local id -> { m, caller, msgId, timer }
    this._nextInbound = 1;
    this._held = [];               // requests that came while reading was stopped
    this._requested = 0;           // requests asked for by open pulls, not yet come
    this._pulls = 0;               // pulls open
    this._fetches = new Set();     // their message iterators, to stop on close
    this._pullFailures = 0;        // pulls failed in a row
    this._slotWaiter = null;
  }

  // The worker asks the shared consumer for requests only for the slots it
  // has free (its concurrency less what it runs, holds and has asked for
  // already). The JetStream clients' consume() asks for more as requests
  // come, not as they finish, so a busy worker held about as many again as
  // it ran, unrun and without progress acks, which no other worker could
  // have; and its pulls are open 30 s, a dropped one noticed only then.
  start(consumer) {
    this._pullLoop(consumer);
  }

  attach(callbacks) {
    super.attach(callbacks);
    this._runHeld();
    return this;
  }

  readStart() {
    super.readStart();
    this._runHeld();
  }

  writeRequest() {
    throw invalidArg('the worker end of a durable NATS channel answers requests (respond()); it cannot send them');
  }

  // The reply goes into the caller's reply subject first, with a message id
  // derived from the request's, so that a request answered twice (its first
  // worker died after replying, before its ack) is stored once; only then is
  // the request acked and leaves the queue.
  writeResponse(id, ok, bodyOrError) {
    const entry = this._inbound.get(id);
    let payload;
    const h = this._link.client.headers();
    if (ok) {
      payload = this._encode(bodyOrError);
    } else {
      payload = Buffer.from(JSON.stringify(bodyOrError || {}));
      h.set(NATS_ERROR_HEADER, '1');
    }
    if (entry === undefined) return this._pushed;
    h.set(ID_HEADER, entry.requestId);
    const n = payload.length;
    this._countOut(n);
    this._publish(replySubject(this._settings, entry.caller), payload, { msgID: `${entry.msgId}.r`, headers: h },
      () => false).then((ack) => {
      this._wrote(n);
      if (ack === null) return;
      if (ack.duplicate) this.durableStats.duplicatesSuppressed++;
      entry.m.ack();
      this._done(id);
    }, (err) => {
      this._wrote(n);
      // A reply that cannot be stored (too large) is an error reply instead.
      if (this._cb !== null) this._cb.onerror(makeError('ERR_PROCWIRE_NATS', `reply not stored: ${err.message}`, err));
      entry.m.term();
      this._done(id);
    });
    return this._pushed;
  }

  close() {
    if (this._closed) return;
    // Requests taken but not answered go back to the queue at once.
    for (const entry of this._inbound.values()) {
      clearInterval(entry.timer);
      nak(entry.m);
    }
    this._inbound.clear();
    for (const m of this._held.splice(0)) nak(m);
    super.close();
    this._wake();
  }

  _stopConsuming() {
    for (const messages of this._fetches) stop(messages);
    this._fetches.clear();
  }

  // How many requests to ask for now: none while reading is stopped or
  // MAX_PULLS are open; else every free slot, once there is one and no
  // pull is open, or a quarter of the slots.
  _wanted() {
    if (this._closed || !this._reading || this._cb === null || this._pulls >= MAX_PULLS) return 0;
    const limit = this._settings.concurrency;
    const free = limit - this._inbound.size - this._held.length - this._requested;
    const least = this._pulls === 0 ? 1 : Math.ceil(limit / MAX_PULLS);
    return free >= least ? free : 0;
  }

  async _pullLoop(consumer) {
    while (!this._closed) {
      const n = this._wanted();
      if (n > 0) {
        this._pull(consumer, n);
      } else {
        // Woken by every change that can free a slot; the timer only
        // bounds what a missed wake-up would cost.
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, 1000).unref();
          this._slotWaiter = () => { clearTimeout(timer); resolve(); };
        });
      }
    }
  }

  // One pull of `n` requests, each handed to the responder as it comes. The
  // slots it did not fill are free again once it ends: filled, expired, or
  // failed (a dropped pull, a server gone), then after a pause that grows
  // while pulls keep failing.
  async _pull(consumer, n) {
    this._requested += n;
    this._pulls++;
    let left = n;
    let messages = null;
    try {
      messages = await consumer.fetch({ max_messages: n, expires: PULL_EXPIRES });
      this._fetches.add(messages);
      if (this._closed) messages.stop();
      for await (const m of messages) {
        left--;
        this._requested--;
        this._arrived(m);
      }
      this._pullFailures = 0;
    } catch (err) {
      // A pull that failed part-way is stopped, not left subscribed: what
      // the server still sends for it is redelivered after ackWait.
      if (messages !== null) stop(messages);
      if (!this._closed) await this._pullFailed(err);
    } finally {
      if (messages !== null) this._fetches.delete(messages);
      this._requested -= left;
      this._pulls--;
      this._wake();
    }
  }

  async _pullFailed(err) {
    this._pullFailures++;
    if (this._pullFailures === 1 && this._cb !== null && !TRANSIENT_PULL.test(String(err && err.message))) {
      this._cb.onerror(makeError('ERR_PROCWIRE_NATS', `JetStream pull failed: ${err.message}`, err));
    }
    await sleep(Math.min(MAX_BACKOFF, 25 * 2 ** Math.min(this._pullFailures - 1, 6)));
  }

  _runHeld() {
    while (this._reading && !this._closed && this._cb !== null && this._held.length > 0) this._take(this._held.shift());
    this._wake();
  }

  // A request the worker asked for: run now, or held until reading starts
  // again (it fills a slot meanwhile), or back to the queue if the worker
  // has closed.
  _arrived(m) {
    if (this._closed) nak(m);
    else if (!this._reading || this._cb === null) this._held.push(m);
    else this._take(m);
  }

  _wake() {
    if (this._slotWaiter) {
      const w = this._slotWaiter;
      this._slotWaiter = null;
      w();
    }
  }

  _done(id) {
    const entry = this._inbound.get(id);
    if (entry === undefined) return;
    clearInterval(entry.timer);
    this._inbound.delete(id);
    this._wake();
  }

  _take(m) {
    const h = m.headers;
    const caller = h ? h.get(CALLER_HEADER) : '';
    const requestId = h ? h.get(ID_HEADER) : '';
    this._countIn(m.data.length);
    if (m.redelivered) this.durableStats.redeliveries++;
    if (!caller || !requestId) {
      // Not a procwire request: nobody to answer.
      m.term();
      return;
    }
    const id = this._nextInbound++;
    // Long tasks: tell JetStream the request is in progress so it is not
    // given to another worker while this one still works on it (three times
    // per ack wait, so one late timer on a busy event loop does not lose it).
    const timer = setInterval(() => {
      this.durableStats.progressAcks++;
      try { m.working(); } catch { /* connection gone */ }
    }, Math.max(50, this._settings.ackWait / 3));
    timer.unref();
    this._inbound.set(id, { m, caller, requestId, msgId: `${caller}.${requestId}`, timer });
    let value;
    try {
      value = this._decode(m.data);
    } catch (err) {
      this._counts.decodeErrors++;
      this.writeResponse(id, false, serializeError(err));
      return;
    }
    this._cb.onrequest(id, value);
  }
}

module.exports = { CallerHandle, WorkerHandle };
