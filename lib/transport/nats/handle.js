'use strict';
// The handle of a core NATS channel: NativeChannel's interface (see
// ../contract.js) over NATS subjects. One end receives on its own subject
// (and `<subject>.r.<id>` for the replies to its requests) and publishes to
// its peer's; see ./index.js for the addressing and delivery guarantees.

const codecs = require('../../codec');
const { makeError } = require('../../errors');
const { serializeError } = require('../../channel/requests');
const { NATS_CONTROL_HEADER, NATS_ERROR_HEADER } = require('../../protocol');
const { capabilities, END_REASONS } = require('../contract');
const { HISTOGRAM_BUCKETS, countedStats, sizeBucket } = require('../../stats');
const { natsError } = require('./connection');

// Requests and replies ride on NATS's own request subjects (writeRequest /
// writeResponse), not on procwire's request messages. Core NATS is
// at-most-once: a request or its reply in flight when a server fails is
// lost while the channel stays open, so requests take `retries`.
const CAPABILITIES = capabilities({ requests: true, retries: true });
// Control header (hello, bye, ping, pong) and error-reply header.
const CTL = NATS_CONTROL_HEADER;
const ERROR_HEADER = NATS_ERROR_HEADER;


// ---- the handle: NativeChannel's interface over NATS --------------------------

// A value as a NATS payload: NATS frames each message itself, so the codec's
// framing bytes go; a payload over the server's max_payload is refused here
// (coded) rather than by the server.
function encodePayload(codec, nc, value) {
  const frame = codec.encode(value);
  const payload = frame.subarray(codec.headerBytes, frame.length - codec.trailerBytes);
  const info = nc.info;
  const limit = info && info.max_payload ? info.max_payload : Infinity;
  if (payload.length > limit) {
    throw makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
      `message of ${payload.length} bytes exceeds the NATS server's max_payload (${limit})`);
  }
  return payload;
}

// A received payload, decoded, unless it exceeds maxMessageSize.
function decodePayload(codec, data, maxMessageSize) {
  if (data.length > maxMessageSize) {
    throw makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
      `message of ${data.length} bytes exceeds maxMessageSize (${maxMessageSize}); skipped`);
  }
  return codec.decode(data);
}

// A reply to request `id`, to the channel's callbacks `cb`: the responder's
// error (JSON, marked by the error header), or the decoded value; a value
// that does not decode fails the request and counts as a decode error. The
// core and the durable handles both deliver replies so.
function deliverReply(cb, counts, codec, maxMessageSize, id, data, isError) {
  if (isError) {
    let error;
    try { error = JSON.parse(Buffer.from(data).toString()); } catch { error = { name: 'Error', message: 'unreadable error reply' }; }
    cb.onresponse(id, false, error);
    return;
  }
  let value;
  try {
    value = decodePayload(codec, data, maxMessageSize);
  } catch (err) {
    counts.decodeErrors++;
    if (cb !== null) cb.onrequestfailed(id, err);
    return;
  }
  cb.onresponse(id, true, value);
}

class NatsHandle {
  constructor(link, subject, peerSubject, options) {
    this._link = link;
    this._nc = link.nc;
    this._subject = subject;          // where this end receives
    this._peer = peerSubject;         // where the other end receives
    this._serialization = options.serialization;
    this._codec = codecs[options.serialization];
    this._maxMessageSize = options.maxMessageSize;
    this._heartbeat = options.heartbeat;
    this._peerTimeout = options.peerTimeout;
    this.capabilities = CAPABILITIES;
    this._cb = null;
    this._closed = false;
    this._peerGone = false;
    this._reading = true;
    this._inbox = [];                 // messages held while paused or not yet attached
    this._outbox = [];                 // publishes not yet handed to the connection
    this._pushed = 0;
    this._handed = 0;
    this._written = 0;
    this._acking = false;
    this._inbound = new Map();        // local request id -> NATS reply subject
    this._nextInbound = 1;
    this._lastHeard = Date.now();
    this._hbTimer = null;
    this._counts = { messagesIn: 0, messagesOut: 0, bytesIn: 0, bytesOut: 0, writeCalls: 0, readCalls: 0, decodeErrors: 0 };
    this._histIn = new Array(HISTOGRAM_BUCKETS).fill(0);
    this._histOut = new Array(HISTOGRAM_BUCKETS).fill(0);
    const onMsg = (err, msg) => this._onMessage(err, msg);
    this._subs = [
      this._nc.subscribe(subject, { callback: onMsg }),
      this._nc.subscribe(`${subject}.r.*`, { callback: onMsg }),
    ];
    link.handles.add(this);
    link.acquire();
  }

  // The peer's subject, once connect()'s hello has named it.
  setPeer(subject) {
    this._peer = subject;
  }

  // Called by the Channel constructor (createHandle).
  attach(callbacks) {
    this._cb = callbacks;
    if (this._inbox.length > 0) process.nextTick(() => this._drainInbox());
    return this;
  }

  startHeartbeat() {
    if (this._heartbeat <= 0 || this._closed) return;
    this._lastHeard = Date.now();
    this._hbTimer = setInterval(() => this._beat(), this._heartbeat);
    this._hbTimer.unref();
  }

  // ---- NativeChannel interface ----

  write(value) {
    this._queue({ subject: this._peer, payload: this._encode(value), reply: undefined, headers: undefined });
    return this._pushed;
  }

  // Capability `requests`: the request goes out with a reply subject that
  // carries its id.
  writeRequest(id, body) {
    const payload = this._encode(body);
    if (this._peer === null) return this._pushed;
    this._queue({ subject: this._peer, payload, reply: `${this._subject}.r.${id}`, headers: undefined });
    return this._pushed;
  }

  // A reply to the inbound request `id`: its body, or (not ok) the
  // responder's serialized error under the error header.
  writeResponse(id, ok, bodyOrError) {
    const reply = this._inbound.get(id);
    let payload;
    let headers;
    if (ok) {
      payload = this._encode(bodyOrError);       // throws (coded) before anything changes
    } else {
      payload = Buffer.from(JSON.stringify(bodyOrError || {}));
      headers = this._link.headers(ERROR_HEADER, '1');
    }
    if (reply === undefined) return this._pushed;
    this._inbound.delete(id);
    this._queue({ subject: reply, payload, reply: undefined, headers });
    return this._pushed;
  }

  writeBuffer(bytes) {
    this._queue({ subject: this._peer, payload: Buffer.from(bytes), reply: undefined, headers: undefined });
    return this._pushed;
  }

  flush() {
    if (this._closed || this._outbox.length === 0 || !this._link.isOnline()) return this._written;
    const q = this._outbox;
    this._outbox = [];
    this._counts.writeCalls++;
    try {
      for (const e of q) {
        this._nc.publish(e.subject, e.payload,
          e.reply === undefined && e.headers === undefined ? undefined : { reply: e.reply, headers: e.headers });
      }
    } catch (err) {
      // The connection closed under us; onLinkClosed finishes the channel.
      if (this._nc.isClosed()) return this._written;
      throw natsError('ERR_PROCWIRE_NATS', 'NATS publish failed', err);
    }
    this._handed = this._pushed;
    this._ack();
    return this._written;
  }

  readStart() {
    this._reading = true;
    if (this._inbox.length > 0) process.nextTick(() => this._drainInbox());
  }

  readStop() {
    this._reading = false;
  }

  // The NATS client keeps its own timers; unref() is best effort (its socket).
  ref() {
    const s = this._socket();
    if (s) s.ref();
  }

  unref() {
    const s = this._socket();
    if (s) s.unref();
  }

  close() {
    if (this._closed) return;
    this._closed = true;
    if (this._hbTimer) clearInterval(this._hbTimer);
    const online = this._link.isOnline();
    if (online) {
      // Requests we were still answering: tell their senders now instead of
      // letting them time out.
      const gone = Buffer.from(JSON.stringify({ name: 'ChannelClosedError', message: 'channel closed', code: 'ERR_PROCWIRE_CHANNEL_CLOSED' }));
      for (const reply of this._inbound.values()) {
        try { this._nc.publish(reply, gone, { headers: this._link.headers(ERROR_HEADER, '1') }); } catch { /* closed */ }
      }
      if (!this._peerGone && this._peer !== null) {
        try { this._nc.publish(this._peer, undefined, { headers: this._link.headers(CTL, 'bye') }); } catch { /* closed */ }
      }
    }
    this._inbound.clear();
    for (const sub of this._subs) {
      try { sub.unsubscribe(); } catch { /* closed */ }
    }
    this._link.handles.delete(this);
    this._link.release();
  }

  // The stats array of lib/stats.js.
  stats() {
    return countedStats(this._counts, {
      bytesOut: this._counts.bytesOut,
      queuedBytes: this._pushed - this._written,
      bufferedBytes: this._inbox.reduce((n, m) => n + m.data.length, 0),
      histogramIn: this._histIn,
      histogramOut: this._histOut,
    });
  }

  // ---- internals ----

  _socket() {
    try {
      const t = this._nc.protocol && this._nc.protocol.transport;
      return t && t.socket && typeof t.socket.ref === 'function' ? t.socket : null;
    } catch {
      return null;
    }
  }

  _encode(value) {
    return encodePayload(this._codec, this._nc, value);
  }

  _queue(entry) {
    const n = entry.payload.length;
    this._outbox.push(entry);
    this._pushed += n;
    this._counts.messagesOut++;
    this._counts.bytesOut += n;
    this._histOut[sizeBucket(n)]++;
  }

  // Bytes count as written once the server has them: one PING/PONG (nc.flush)
  // in flight at a time covers everything published before it. If the
  // connection drops first, they are out of our hands (at-most-once).
  _ack() {
    if (this._acking || this._handed === this._written || this._closed) return;
    this._acking = true;
    const mark = this._handed;
    const done = () => {
      this._acking = false;
      if (this._closed) return;
      if (mark > this._written) {
        this._written = mark;
        if (this._cb) this._cb.onwrite(this._written);
      }
      if (this._closed) return;
      if (this._outbox.length > 0) this.flush(); else this._ack();
    };
    this._nc.flush().then(done, done);
  }

  onStatus(status) {
    if (this._closed) return;
    if (status.type === 'reconnect') {
      this._lastHeard = Date.now();
      if (this._outbox.length > 0) this.flush();
      else this._ack();
    }
    if (this._cb !== null) this._cb.onstatus(status);
  }

  onLinkClosed(err) {
    if (this._closed || this._cb === null) {
      if (!this._closed) this.close();
      return;
    }
    this._cb.onfail(natsError('ERR_PROCWIRE_NATS', 'NATS connection closed', err));
  }

  _beat() {
    if (this._closed) return;
    const now = Date.now();
    if (!this._link.isOnline()) {
      this._lastHeard = now;      // our outage, not the peer's
      return;
    }
    if (now - this._lastHeard > this._peerTimeout) {
      this._peerLost();
      return;
    }
    if (now - this._lastHeard < this._heartbeat || this._peer === null) return;
    this._nc.request(this._peer, undefined, { timeout: this._heartbeat, headers: this._link.headers(CTL, 'ping') })
      .then(() => { this._lastHeard = Date.now(); }, () => {});
  }

  _peerLost() {
    if (this._closed || this._peerGone) return;
    this._peerGone = true;
    if (this._cb) this._cb.onend(END_REASONS.END_OF_STREAM);
  }

  _onMessage(err, msg) {
    if (this._closed) return;
    if (err) {
      if (this._cb !== null) this._cb.onerror(natsError('ERR_PROCWIRE_NATS', 'NATS subscription failed', err));
      return;
    }
    this._lastHeard = Date.now();
    const h = msg.headers;
    if (h !== undefined && msg.subject === this._subject) {
      const ctl = h.get(CTL);
      if (ctl === 'ping') {
        if (msg.reply) try { msg.respond(undefined, { headers: this._link.headers(CTL, 'pong') }); } catch { /* closed */ }
        return;
      }
    }
    if (this._cb === null || !this._reading || this._inbox.length > 0) {
      this._inbox.push(msg);
      return;
    }
    this._deliver(msg);
  }

  _drainInbox() {
    while (this._inbox.length > 0 && this._reading && this._cb !== null && !this._closed) this._deliver(this._inbox.shift());
  }

  _decode(data) {
    return decodePayload(this._codec, data, this._maxMessageSize);
  }

  _deliver(msg) {
    const data = msg.data;
    const c = this._counts;
    c.readCalls++;
    c.messagesIn++;
    c.bytesIn += data.length;
    this._histIn[sizeBucket(data.length)]++;
    if (msg.subject !== this._subject) {
      this._onReply(msg);
      return;
    }
    // The peer's bye comes after its last message, in order.
    if (msg.headers !== undefined && msg.headers.get(CTL) === 'bye') {
      this._peerLost();
      return;
    }
    let value;
    try {
      value = this._decode(data);
    } catch (err) {
      c.decodeErrors++;
      if (msg.reply) {
        try {
          this._nc.publish(msg.reply, Buffer.from(JSON.stringify(serializeError(err))), { headers: this._link.headers(ERROR_HEADER, '1') });
        } catch { /* closed */ }
      }
      this._cb.onread([], [0, err]);
      return;
    }
    if (msg.reply) {
      const id = this._nextInbound++;
      this._inbound.set(id, msg.reply);
      this._cb.onrequest(id, value);
    } else {
      this._cb.onread([value], undefined);
    }
  }

  _onReply(msg) {
    const id = Number(msg.subject.slice(this._subject.length + 3));
    const h = msg.headers;
    if (h !== undefined && h.hasError) {
      // 503: no subscriber for the peer's subject.
      if (this._cb !== null) {
        this._cb.onrequestfailed(id, makeError('ERR_PROCWIRE_PEER_UNREACHABLE',
          `no subscriber on ${this._peer} (NATS ${h.status})`));
      }
      return;
    }
    deliverReply(this._cb, this._counts, this._codec, this._maxMessageSize, id, msg.data,
      h !== undefined && Boolean(h.get(ERROR_HEADER)));
  }
}

module.exports = { NatsHandle, serializeError, encodePayload, decodePayload, deliverReply, CTL, ERROR_HEADER };
