'use strict';
// procwire channels over NATS (the official `nats` client, core NATS).
//
//   procwire.listen('nats://host:4222', { subject: 'jobs', queue: 'workers' }, (ch) => ...)
//   const ch = await procwire.connect('nats://host:4222', { subject: 'jobs' })
//
// Addressing. A listener subscribes to `subject` in a queue group (default
// 'procwire'), so every hello goes to exactly one listener of the group: many
// worker processes on many hosts share one subject and NATS spreads the
// channels over them. A connecting client picks a private subject
// <prefix>.<nuid> (prefix '_PROCWIRE'), subscribes to it and sends a hello as
// a NATS request on `subject`; the listener that gets it makes the channel's
// other end on its own private subject and replies with it. From then on the
// two ends publish straight to each other's subject: one NATS message per
// procwire message, its payload the codec's payload without the stream
// framing (advanced: the V8 serialization bytes with no u32 length header;
// json: the JSON text with no '\n'), so NATS tools and other clients can read
// and write them.
//
// Requests are NATS request/reply: channel.request() publishes the payload to
// the peer's subject with a reply subject <own subject>.r.<id>; the peer's
// responder answers there (an error as JSON with a `Procwire-Error` header).
// A plain NATS client can `nc.request(<channel subject>, payload)` too.
//
// Delivery: core NATS is at-most-once. Messages are delivered in order, but a
// message that is in flight when a NATS server or connection fails is lost,
// and nothing is stored for a peer that is not subscribed. Requests therefore
// take a `timeout`, and `retries` to re-send after a timeout (or after "no
// responders" while the peer resubscribes during a failover), which makes a
// request at-least-once: the responder may run twice. While the client is
// disconnected, sends are kept (and count against the high-water mark) and
// published in order after it reconnects; what was already handed to the
// failed connection may be lost.

const { Channel } = require('../channel');
const { serializeError } = require('../channel/requests');
const codecs = require('../codec');
const { makeError } = require('../errors');
const { invalidArg, validateObject, validateSize, validateSerialization } = require('../validate');
const { DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_HELLO_TIMEOUT, NATS_CONTROL_HEADER, NATS_ERROR_HEADER } = require('../protocol');
const { capabilities, END_REASONS } = require('./contract');
const { HISTOGRAM_BUCKETS, countedStats, sizeBucket } = require('../stats');
const { ServerBase, listenArguments } = require('./server');

// Requests and replies ride on NATS's own request subjects (writeRequest /
// writeResponse), not on procwire's request messages.
const CAPABILITIES = capabilities({ requests: true });
// Control header (hello, bye, ping, pong) and error-reply header.
const CTL = NATS_CONTROL_HEADER;
const ERROR_HEADER = NATS_ERROR_HEADER;
const DEFAULT_PREFIX = '_PROCWIRE';
const DEFAULT_QUEUE = 'procwire';
const DEFAULT_HEARTBEAT = 5000;
const RETRYABLE = new Set(['ERR_PROCWIRE_REQUEST_TIMEOUT', 'ERR_PROCWIRE_PEER_UNREACHABLE']);
const DEFAULT_RETRY_DELAY = 100;

// The NATS client is an optional peer dependency: most users never open a
// NATS channel, so it is loaded on first use, and its absence is a coded error
// that says what to install rather than a crash at require('procwire').
let natsModule;
function nats() {
  if (!natsModule) {
    try {
      natsModule = require('nats');
    } catch (err) {
      const missing = err && err.code === 'MODULE_NOT_FOUND' && /'nats'/.test(err.message);
      throw makeError('ERR_PROCWIRE_NATS', missing
        ? 'NATS channels need the nats package (an optional peer dependency of procwire): run `npm install nats`'
        : `the nats package could not be loaded (${err.message}); run \`npm install nats\``, err);
    }
  }
  return natsModule;
}

// A subject of tokens without wildcards or whitespace.
function validateSubject(value, name, allowEmpty = false) {
  if (value === undefined && allowEmpty) return undefined;
  if (typeof value !== 'string' || value.length === 0 || /[\s*>]/.test(value) ||
      value.startsWith('.') || value.endsWith('.') || value.includes('..')) {
    throw invalidArg(`${name} must be a NATS subject without wildcards or spaces, got ${String(value)}`);
  }
  return value;
}

// 'nats://a:4222' or 'nats://a:4222,nats://b:4222', plus options.servers.
function serversFor(target, options) {
  const list = String(target).split(',').map((s) => s.trim()).filter(Boolean);
  if (options.servers !== undefined) {
    if (!Array.isArray(options.servers)) throw invalidArg('options.servers must be an array of URLs');
    list.push(...options.servers.map(String));
  }
  return list;
}

function natsOptions(servers, options) {
  const extra = validateObject(options.nats, 'options.nats');
  return {
    servers,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    ...extra,
  };
}

// Wraps a NATS error in a coded one.
function natsError(code, message, err) {
  return makeError(code, err ? `${message}: ${err.message}` : message, err || undefined,
    err && err.code !== undefined ? { natsCode: err.code } : undefined);
}

// ---- one NATS connection, shared by the channels that use it ----------------

class Link {
  constructor(nc, owned) {
    this.nc = nc;
    this.owned = owned;
    this.users = 0;
    this.handles = new Set();
    this.listeners = new Set();
    this.online = true;
    this.closed = false;
    this._watch();
    nc.closed().then((err) => this._onClosed(err), (err) => this._onClosed(err));
  }

  async _watch() {
    try {
      for await (const s of this.nc.status()) {
        if (s.type === 'disconnect') this.online = false;
        else if (s.type === 'reconnect') this.online = true;
        const status = { type: s.type, data: s.data };
        for (const l of this.listeners) l(status);
        for (const h of [...this.handles]) h._status(status);
      }
    } catch { /* the iterator ends when the connection closes */ }
  }

  // Connected right now? (The status event can lag the socket by a tick; the
  // protocol's flag does not.)
  isOnline() {
    if (this.closed || this.nc.isClosed()) return false;
    const p = this.nc.protocol;
    if (p && p.connected === false) return false;
    return this.online;
  }

  _onClosed(err) {
    this.closed = true;
    this.online = false;
    for (const h of [...this.handles]) h._linkClosed(err);
  }

  acquire() {
    this.users++;
  }

  release() {
    if (--this.users > 0 || !this.owned || this.closed) return;
    // Let the last publishes (a bye) reach the server, then close.
    const nc = this.nc;
    let timer;
    Promise.race([nc.flush(), new Promise((r) => { timer = setTimeout(r, 2000); })])
      .catch(() => {})
      .finally(() => { clearTimeout(timer); nc.close().catch(() => {}); });
  }
}

async function openLink(servers, options) {
  if (options.connection !== undefined) {
    const nc = options.connection;
    if (nc === null || typeof nc.publish !== 'function' || typeof nc.subscribe !== 'function') {
      throw invalidArg('options.connection must be a NatsConnection from the nats package');
    }
    if (!nc._procwireLink) nc._procwireLink = new Link(nc, false);
    return nc._procwireLink;
  }
  if (servers.length === 0) throw invalidArg('a NATS URL (nats://host:port) is required');
  let nc;
  try {
    nc = await nats().connect(natsOptions(servers, options));
  } catch (err) {
    if (err && err.code === 'ERR_PROCWIRE_NATS') throw err;
    throw natsError('ERR_PROCWIRE_CONNECT_FAILED', `cannot connect to NATS at ${servers.join(',')}`, err);
  }
  return new Link(nc, true);
}

function headersWith(key, value) {
  const h = nats().headers();
  h.set(key, value);
  return h;
}

// ---- the handle: NativeChannel's interface over NATS --------------------------

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
      headers = headersWith(ERROR_HEADER, '1');
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
      // The connection closed under us; _linkClosed finishes the channel.
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
        try { this._nc.publish(reply, gone, { headers: headersWith(ERROR_HEADER, '1') }); } catch { /* closed */ }
      }
      if (!this._peerGone && this._peer !== null) {
        try { this._nc.publish(this._peer, undefined, { headers: headersWith(CTL, 'bye') }); } catch { /* closed */ }
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
    const frame = this._codec.encode(value);
    // NATS frames each message itself: the codec's framing bytes go.
    const payload = frame.subarray(this._codec.headerBytes, frame.length - this._codec.trailerBytes);
    const info = this._nc.info;
    const limit = info && info.max_payload ? info.max_payload : Infinity;
    if (payload.length > limit) {
      throw makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
        `message of ${payload.length} bytes exceeds the NATS server's max_payload (${limit})`);
    }
    return payload;
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

  _status(status) {
    if (this._closed) return;
    if (status.type === 'reconnect') {
      this._lastHeard = Date.now();
      if (this._outbox.length > 0) this.flush();
      else this._ack();
    }
    if (this._cb !== null) this._cb.onstatus(status);
  }

  _linkClosed(err) {
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
    this._nc.request(this._peer, undefined, { timeout: this._heartbeat, headers: headersWith(CTL, 'ping') })
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
        if (msg.reply) try { msg.respond(undefined, { headers: headersWith(CTL, 'pong') }); } catch { /* closed */ }
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
    if (data.length > this._maxMessageSize) {
      throw makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
        `message of ${data.length} bytes exceeds maxMessageSize (${this._maxMessageSize}); skipped`);
    }
    return this._codec.decode(data);
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
          this._nc.publish(msg.reply, Buffer.from(JSON.stringify(serializeError(err))), { headers: headersWith(ERROR_HEADER, '1') });
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
    if (h !== undefined && h.get(ERROR_HEADER)) {
      let error;
      try { error = JSON.parse(Buffer.from(msg.data).toString()); } catch { error = { name: 'Error', message: 'unreadable error reply' }; }
      this._cb.onresponse(id, false, error);
      return;
    }
    let body;
    try {
      body = this._decode(msg.data);
    } catch (err) {
      this._counts.decodeErrors++;
      if (this._cb !== null) this._cb.onrequestfailed(id, err);
      return;
    }
    this._cb.onresponse(id, true, body);
  }
}

// ---- the channel ----------------------------------------------------------------

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

function newSubject(prefix) {
  return `${prefix}.${nats().nuid.next()}`;
}

// ---- listen -----------------------------------------------------------------------

class NatsServer extends ServerBase {
  constructor(servers, options) {
    super();
    this._servers = servers;
    this._options = options;
    this._subject = validateSubject(options.subject, 'options.subject');
    this._outbox = options.queue === undefined ? DEFAULT_QUEUE : validateSubject(options.queue, 'options.queue');
    this._prefix = options.prefix === undefined ? DEFAULT_PREFIX : validateSubject(options.prefix, 'options.prefix');
    if (options.serialization !== undefined) validateSerialization(options.serialization);
    handleOptions(options, 'advanced');  // validates early
    this._link = null;
    this._sub = null;
  }

  address() {
    return { servers: this._servers, subject: this._subject, queue: this._outbox };
  }

  get connection() {
    return this._link ? this._link.nc : null;
  }

  async _start() {
    const link = await openLink(this._servers, this._options);
    if (this._closed) {
      link.acquire();
      link.release();
      return;
    }
    this._link = link;
    link.acquire();
    this._onStatus = (s) => this.emit('status', s);
    link.listeners.add(this._onStatus);
    this._sub = link.nc.subscribe(this._subject, { queue: this._outbox, callback: (err, msg) => this._onHello(err, msg) });
    // The subscription is registered once the server answers this PING.
    await link.nc.flush();
  }

  _refuse(msg, message) {
    if (!msg.reply) return;
    try {
      msg.respond(Buffer.from(JSON.stringify({ error: { message, code: 'ERR_PROCWIRE_CONNECT_FAILED' } })));
    } catch { /* closed */ }
    this.emit('reject', makeError('ERR_PROCWIRE_CONNECT_FAILED', message));
  }

  _onHello(err, msg) {
    if (err) {
      this._report(natsError('ERR_PROCWIRE_NATS', 'NATS subscription failed', err));
      return;
    }
    if (this._closed) return;
    const h = msg.headers;
    if (h === undefined || h.get(CTL) !== 'hello' || !msg.reply) {
      this._refuse(msg, `not a procwire hello on ${this._subject}`);
      return;
    }
    let hello;
    try {
      hello = JSON.parse(Buffer.from(msg.data).toString());
      validateSubject(hello.subject, 'hello.subject');
      hello.serialization = validateSerialization(hello.serialization);
    } catch (e) {
      this._refuse(msg, `bad procwire hello: ${e.message}`);
      return;
    }
    if (this._options.serialization !== undefined && hello.serialization !== this._options.serialization) {
      this._refuse(msg, `this listener speaks ${this._options.serialization}, the client asked for ${hello.serialization}`);
      return;
    }
    const subject = newSubject(this._prefix);
    const handle = new NatsHandle(this._link, subject, hello.subject, handleOptions(this._options, hello.serialization));
    const channel = new NatsChannel(null, channelOptions(this._options, hello.serialization, handle,
      { subject: hello.subject, name: typeof hello.name === 'string' ? hello.name : undefined }));
    channel.subject = subject;
    this._accept(channel);
    try {
      msg.respond(Buffer.from(JSON.stringify({ v: 1, subject })));
    } catch (e) {
      channel.destroy(natsError('ERR_PROCWIRE_NATS', 'hello reply failed', e));
      return;
    }
    handle.startHeartbeat();
  }

  // close() (ServerBase) stops taking new channels; open channels stay open
  // (the connection closes with the last of them).
  _stop() {
    if (this._sub) {
      try { this._sub.unsubscribe(); } catch { /* closed */ }
    }
    if (this._link) {
      this._link.listeners.delete(this._onStatus);
      this._link.release();
    }
  }
}

function listen(target, options, onChannel) {
  ({ options, onChannel } = listenArguments(options, onChannel));
  const server = new NatsServer(serversFor(target, options), options);
  if (onChannel !== undefined) server.on('channel', onChannel);
  server.ready = new Promise((resolve, reject) => {
    server._start().then(() => {
      if (!server._closed) server.emit('listening');
      resolve(server);
    }, (err) => {
      const e = err && err.code && String(err.code).startsWith('ERR_PROCWIRE')
        ? err : natsError('ERR_PROCWIRE_LISTEN_FAILED', 'NATS listen failed', err);
      if (server.listenerCount('error') > 0) server.emit('error', e);
      reject(e);
    });
  });
  server.ready.catch(() => {});
  return server;
}

// ---- connect --------------------------------------------------------------------------

async function hello(nc, subject, body, timeout) {
  const deadline = Date.now() + timeout;
  const data = Buffer.from(JSON.stringify(body));
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    let reply;
    try {
      reply = await nc.request(subject, data, { timeout: left, headers: headersWith(CTL, 'hello') });
    } catch (err) {
      // 503: nobody subscribed (yet: a listener's interest may still be on its
      // way through the cluster). Try again until the deadline.
      if (err && String(err.code) === '503') {
        await new Promise((r) => setTimeout(r, Math.min(100, Math.max(1, deadline - Date.now()))));
        continue;
      }
      if (err && err.code === 'TIMEOUT') break;
      throw natsError('ERR_PROCWIRE_CONNECT_FAILED', `procwire hello on ${subject} failed`, err);
    }
    let answer;
    try { answer = JSON.parse(Buffer.from(reply.data).toString()); } catch { answer = null; }
    if (answer && answer.error) {
      throw makeError('ERR_PROCWIRE_CONNECT_FAILED', `listener on ${subject} refused: ${answer.error.message}`);
    }
    if (!answer || typeof answer.subject !== 'string') {
      throw makeError('ERR_PROCWIRE_CONNECT_FAILED', `unexpected hello reply on ${subject}`);
    }
    return answer.subject;
  }
  throw makeError('ERR_PROCWIRE_CONNECT_FAILED', `no procwire listener answered on ${subject} within ${timeout} ms`);
}

async function connect(target, options) {
  options = validateObject(options, 'options');
  const subject = validateSubject(options.subject, 'options.subject');
  const prefix = options.prefix === undefined ? DEFAULT_PREFIX : validateSubject(options.prefix, 'options.prefix');
  const serialization = validateSerialization(options.serialization);
  const helloTimeout = validateSize(options.helloTimeout, 'helloTimeout', DEFAULT_HELLO_TIMEOUT, 2 ** 31 - 1);
  const hopts = handleOptions(options, serialization);
  const servers = serversFor(target, options);
  const link = await openLink(servers, options);
  const own = newSubject(prefix);
  const handle = new NatsHandle(link, own, null, hopts);
  let peer;
  try {
    peer = await hello(link.nc, subject, { v: 1, subject: own, serialization, name: options.name }, helloTimeout);
  } catch (err) {
    handle.close();
    throw err;
  }
  handle.setPeer(peer);
  const channel = new NatsChannel(null, channelOptions(options, serialization, handle, { subject: peer }));
  channel.subject = own;
  handle.startHeartbeat();
  return channel;
}

module.exports = { listen, connect, NatsChannel, NatsServer };
