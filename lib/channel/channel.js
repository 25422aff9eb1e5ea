'use strict';
// Channel: one class for every transport (fork socketpair, named unix
// socket, TCP, TLS, NATS). The socket, framing and codec live in the backend
// handle (lib/transport/); this class keeps the public API, the phase
// (connecting -> open -> closing -> closed), the lifecycle and the ref
// policy, over collaborators made once here: Writer (write side), Reader
// (read side), Inbox, Control, RequestTable and Responder, SegmentFlow and
// RingNegotiation. docs/internals.md walks a message through them.

const EventEmitter = require('events');
const { makeError, systemError, nodeError } = require('../errors');
const { HandleProtocol } = require('../child-process/handle-protocol');
const { handleType } = require('../child-process/handle-conversion');
const { checkHandle, END_REASONS } = require('../transport/contract');
const { nativeHandle } = require('../transport/native-handle');
// Loaded with the channel, not on first use: a channel's close takes its
// final stats, and a require() then can fail (EMFILE in a process out of
// descriptors) where nothing can report it.
const { publicStats } = require('../stats');
const { settleClosed } = require('../error-context');
const { debug } = require('../debug');
const { validateObject, validateMessage, validateFunction } = require('../validate');
const { channelSettings } = require('./settings');
const { isSendOptions, parseTransfer } = require('./transfer');
const { Writer } = require('./writer');
const { Reader, HOLD_USER } = require('./reader');
const { Inbox } = require('./inbox');
const { Control } = require('./control');
const { RequestTable, Responder } = require('./requests');
const { SegmentFlow } = require('./segments');
const { RingNegotiation } = require('./rings');
const {
  kHandle, kCaps, kPhase, kWriter, kReader, kInbox, kRequests, kResponder, kSegments, kRings, kControl, kHandles,
  kFinish, kEmitError, kApplyRefPolicy, kSendNow, kSendPlain, kSetReadLimit, kHelloDone,
} = require('./symbols');

const kFinalStats = Symbol('procwire.finalStats');
const kFinalCounters = Symbol('procwire.finalCounters');

function applyRefPolicy(channel) {
  channel[kApplyRefPolicy]();
}

class Channel extends EventEmitter {
  // Internal: made by fork(), listen() and connect(), never by users.
  // fd: a connected (or connecting) non-blocking stream socket this channel
  // now owns, when no options.createHandle supplies the backend's handle.
  // Called from user code with anything else, it throws a coded error,
  // never aborts.
  constructor(fd, options) {
    super();
    options = validateObject(options, 'options');
    const transport = options.transport || 'socket';
    const createHandle = typeof options.createHandle === 'function' ? options.createHandle : nativeHandle(fd, transport);
    const settings = channelSettings(options);
    this.serialization = settings.serialization;
    this.maxMessageSize = settings.maxMessageSize;
    this.highWaterMark = settings.highWaterMark;
    this.maxQueuedBytes = settings.maxQueuedBytes;
    this.requestTimeout = settings.requestTimeout;
    this.maxConcurrentRequests = settings.maxConcurrentRequests;
    this.maxSegmentsInFlight = settings.maxSegmentsInFlight;
    this.transport = transport;
    // Only a procwire peer on a unix socket can take descriptors and knows
    // the segment references; everyone else gets every byte inline.
    this.outOfLine = options.segments && this.serialization === 'advanced' ? settings.outOfLine : 'never';
    // Recycled, writable segments: by default only between a parent and its
    // own forked child, which already trust each other (docs/rings.md).
    this.segmentPool = settings.segmentPool === undefined ? transport === 'fork' : settings.segmentPool;
    this.segmentPoolMaxBytes = settings.segmentPoolMaxBytes;
    this.segmentPoolMaxCount = settings.segmentPoolMaxCount;
    this.segmentPoolIdleTimeout = settings.segmentPoolIdleTimeout;
    this.peer = options.peer || null;
    this[kPhase] = options.connecting ? 'connecting' : 'open';
    this[kFinalStats] = null;
    this[kFinalCounters] = null;
    this.#refPolicy = options.refPolicy || 'always';
    const threshold = this.outOfLine === 'never' ? -1 : this.outOfLine === 'always' ? 0 : settings.outOfLineThreshold;
    // [segment bytes sent, segments sent], written by the addon; with the
    // peer's acknowledgements they give the shared memory in flight.
    const counters = this.outOfLine === 'never' ? null : new Float64Array(2);
    // A transport supplies its handle through createHandle (the native
    // backend's is lib/transport/native-handle.js); every handle keeps the
    // contract of lib/transport/contract.js and declares its capabilities.
    const handle = createHandle(this.#callbacks(), {
      serialization: this.serialization, maxMessageSize: this.maxMessageSize, connecting: Boolean(options.connecting),
      segmentThreshold: threshold, segmentCounters: counters,
    });
    const caps = checkHandle(handle, transport);
    this[kHandle] = handle;
    this[kCaps] = caps;
    // The advanced format's JavaScript encoder writes most messages in a
    // fraction of ValueSerializer's time; a handle that takes frames so
    // encoded (writeFrame) gets those, and whatever that encoder declines
    // goes through write() as before. Views from the segment threshold on
    // are declined too, so the addon may still send them in shared memory.
    const fastMaxView = this.serialization === 'advanced' && caps.frames ? (threshold < 0 ? Infinity : threshold) : -1;
    this[kSegments] = new SegmentFlow(this, handle, caps, counters);
    this[kWriter] = new Writer(this, handle, caps, this[kSegments], fastMaxView);
    this[kReader] = new Reader(this, handle, this.serialization === 'advanced' && caps.jsDecode);
    this[kInbox] = new Inbox(this);
    this[kControl] = new Control(this);
    this[kRequests] = new RequestTable(this, caps);
    this[kResponder] = new Responder(this);
    // Shared-memory rings: only between procwire ends on a unix socket this
    // process reads natively (fork channels, named unix channels).
    this[kRings] = new RingNegotiation(this, handle, settings.rings === 'auto' && options.segments === true && caps.rings,
      options.hello === 'client' || options.hello === 'server' ? options.hello : null);
    this.#refed = true;
    const announcement = this[kSegments].announcement(this[kRings].offered);
    if (announcement !== null) this[kWriter].sendControl(announcement);
    // Handles (descriptors beside a NODE_HANDLE frame) need a unix socket
    // this process reads natively: fork channels and named unix channels.
    this[kHandles] = null;
    if (caps.handles) {
      handle.acceptHandles();
      this[kHandles] = new HandleProtocol(this, this,
        (message, h, internal) => this[kInbox].deliverWithHandle(message, h, internal),
        (message, h, sendOptions, callback) => this.#sendWithHandle(message, h, sendOptions, callback));
    }
    this.on('newListener', (event) => {
      if (event === 'message') this[kInbox].scheduleDrain();
      if (event === 'message' || event === 'disconnect') process.nextTick(applyRefPolicy, this);
    });
    this.on('removeListener', () => process.nextTick(applyRefPolicy, this));
    this[kApplyRefPolicy]();
  }

  #refPolicy;
  #refed;

  // The callbacks the handle calls (lib/transport/contract.js), made once.
  #callbacks() {
    return {
      onread: (messages, errors, segments, segmentBytes, frameBytes, fds, smallFrames) =>
        this[kReader].onBatch(messages, errors, segments, segmentBytes, frameBytes, fds, smallFrames),
      // Recycled segments whose Buffers were collected: hand them back.
      onsegmentreturn: (ids) => this[kSegments].returnSegments(ids),
      onwrite: (written) => this[kWriter].onWritten(written),
      onend: (reason, err, errnoName) => this.#onEnd(reason, err, errnoName),
      onconnect: () => this.#onConnect(),
      // The protected interface a backend uses instead of Channel's
      // internals (lib/transport/contract.js documents each).
      onrequest: (id, body) => this[kResponder].onRequest({ id, body }),
      onresponse: (id, ok, bodyOrError) => this[kRequests].onResponse(id, ok, bodyOrError),
      onrequestfailed: (id, err) => this[kRequests].settle(id, err),
      onstatus: (status) => this.emit('status', status),
      onerror: (err) => this[kEmitError](err),
      onfail: (err) => this[kFinish]('error', err),
    };
  }

  get connected() {
    return this[kPhase] === 'open' || this[kPhase] === 'connecting';
  }

  get closed() {
    return this[kPhase] === 'closed';
  }

  // Bytes queued but not yet handed to the kernel, plus shared-memory bytes
  // the peer has not yet taken.
  get writableLength() {
    return this[kWriter].queued;
  }

  get writableNeedDrain() {
    return this[kWriter].needDrain;
  }

  // send(message[, handle][, options][, callback]) -> boolean
  // Same shape as process.send. The callback runs (never synchronously) once
  // the message's bytes are in the kernel, or with an error if the channel
  // closed first.
  // send(message, { transfer: [buf] }[, callback]) hands buffers over:
  // they are detached here, and a procwire.alloc() buffer travels without a
  // byte copied.
  send(message, handle, options, callback) {
    if (typeof handle === 'function') {
      callback = handle;
      handle = undefined;
      options = undefined;
    } else if (typeof options === 'function') {
      callback = options;
      options = undefined;
    }
    if (isSendOptions(handle)) {
      options = handle;
      handle = undefined;
    }
    if (callback !== undefined) validateFunction(callback, 'callback');
    if ((handle !== undefined && handle !== null) || (this[kHandles] !== null && this[kHandles].host._handleQueue)) {
      return this.#sendWithHandle(message, handle, options, callback);
    }
    return this[kSendNow](message, options, callback);
  }

  // Node's _send: a message with a handle goes through the handle protocol
  // (and so does everything sent while a handle waits for its answer).
  #sendWithHandle(message, handle, options, callback) {
    const handles = this[kHandles];
    if (handles === null) {
      if (handle !== undefined && handle !== null) {
        if (handleType(handle) === null) throw nodeError('ERR_INVALID_HANDLE_TYPE');
        throw makeError('ERR_PROCWIRE_HANDLE_UNSUPPORTED',
          `a ${this.transport} channel cannot pass handles; only unix sockets (fork, named channels) can`);
      }
      return this[kSendNow](message, options, callback);
    }
    validateMessage(message);
    return handles.send(message, handle, options || {}, callback,
      (m, o, cb) => this[kSendNow](m, o && o.transfer !== undefined ? o : undefined, cb));
  }

  // A message without a handle, its arguments normalised.
  [kSendNow](message, options, callback) {
    validateMessage(message);
    const rings = this[kRings];
    if (rings.pending) rings.maybeStart();
    const writer = this[kWriter];
    if (this[kPhase] !== 'open' && this[kPhase] !== 'connecting') return writer.refuse(callback, true);
    return writer.send(message, options === undefined ? undefined : parseTransfer(options, this.maxMessageSize),
      callback);
  }

  // A plain message for the child_process surface: errors go to the
  // callback, or to onError unless swallowed, as Node's _send does.
  // sendOptions: procwire's own send options ({ transfer }), or undefined.
  [kSendPlain](message, callback, swallowErrors, onError, sendOptions) {
    if (this[kPhase] !== 'open' && this[kPhase] !== 'connecting') {
      const err = makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'channel closed');
      if (typeof callback === 'function') process.nextTick(callback, err);
      else if (!swallowErrors) process.nextTick(onError, err);
      return false;
    }
    return this[kSendNow](message, sendOptions, typeof callback === 'function' ? callback : undefined);
  }

  // The descriptor of the socket (undefined once closed), as Node's
  // child.channel.fd.
  get fd() {
    if (this[kPhase] === 'closed' || !this[kCaps].fd) return undefined;
    return this[kHandle].fd();
  }

  // request(value, { timeout, signal }) -> Promise of the peer's reply.
  request(value, options) {
    return this[kRequests].open(value, options, this.#refed);
  }

  // respond(async (value, channel) => reply): answers the peer's requests.
  respond(handler) {
    this[kResponder].set(handler === null ? null : validateFunction(handler, 'handler'));
    // A child whose only job is answering requests must stay alive for them.
    this[kApplyRefPolicy]();
    return this;
  }

  // Flushes what is queued, then closes. Idempotent.
  close() {
    if (this[kPhase] === 'closed' || this[kPhase] === 'closing') return;
    this[kPhase] = 'closing';
    const writer = this[kWriter];
    if (writer.pushed === writer.written) this[kFinish]('local', null);
    else writer.scheduleFlush();
  }

  // Closes now; queued messages are dropped (their callbacks get the error).
  destroy(err) {
    if (this[kPhase] === 'closed') return;
    this[kFinish]('destroyed', err || null);
  }

  disconnect() {
    this.close();
  }

  ref() {
    this.#refPolicy = 'always';
    this[kApplyRefPolicy]();
    return this;
  }

  unref() {
    this.#refPolicy = 'never';
    this[kApplyRefPolicy]();
    return this;
  }

  // Stops reading (the peer gets backpressure) until resume().
  pause() {
    this[kReader].hold(HOLD_USER);
    return this;
  }

  resume() {
    this[kReader].release(HOLD_USER);
    return this;
  }

  stats() {
    if (this[kPhase] === 'closed') {
      // Made from the counters taken at close when first asked for: most
      // closed channels are never asked.
      if (this[kFinalStats] === null) this[kFinalStats] = publicStats(...this[kFinalCounters]);
      return this[kFinalStats];
    }
    return publicStats(...this.#counters());
  }

  // The native counters and what this side adds to them, now.
  #counters() {
    this[kWriter].drainStage();
    return [this[kHandle].stats(), {
      pendingRequests: this[kRequests].size,
      // On when both ends can: this end allows it and the peer said so.
      outOfLineEnabled: this.outOfLine !== 'never' && this[kSegments].peerTakes,
      decodeErrorsInJs: this[kReader].decodeErrorsInJs,
    }];
  }

  // ---- for lib/security/ ----------------------------------------------------

  // The largest payload the handle accepts from now on (the hello runs under
  // a small one). false: a frame already buffered is over it, and the
  // channel is closed with a framing error.
  [kSetReadLimit](bytes) {
    if (this[kPhase] === 'closed' || !this[kCaps].readLimit) return true;
    this[kWriter].writeLimit = bytes;
    if (this[kHandle].setMaxMessageSize(bytes)) return true;
    const err = makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
      `a partially received frame exceeds the ${bytes}-byte limit now in force`);
    process.nextTick(() => this[kFinish]('framing-error', err));
    return false;
  }

  // The hello succeeded on this channel.
  [kHelloDone]() {
    this[kRings].onHelloDone();
  }

  // ---- internals ----------------------------------------------------------

  // onlyListeners: a request settled, which matters to the 'listeners'
  // policy alone.
  [kApplyRefPolicy](onlyListeners) {
    if (this[kPhase] === 'closed') return;
    if (onlyListeners === true && this.#refPolicy !== 'listeners') return;
    let want;
    if (this[kWriter].held || this.#refPolicy === 'always') want = true;
    else if (this.#refPolicy === 'never') want = false;
    // 'listeners': like Node's child side of an IPC channel, keep the process
    // alive only while someone listens, a responder is registered, or a
    // request is in flight.
    else {
      want = this[kInbox].hasTaker() || this.listenerCount('disconnect') > 0 ||
        this[kResponder].handler !== null || this[kRequests].size > 0;
    }
    if (want === this.#refed) return;
    this.#refed = want;
    if (want) this[kHandle].ref(); else this[kHandle].unref();
  }

  #onConnect() {
    if (this[kPhase] === 'connecting') this[kPhase] = 'open';
    this.emit('connect');
  }

  [kEmitError](err) {
    // A hostile or broken peer must not be able to crash the process through
    // an unhandled 'error' event: without listeners, errors are warnings (and
    // fatal ones are also passed to 'close').
    if (this.listenerCount('error') > 0) this.emit('error', err);
    else process.emitWarning(err);
  }

  // The handle's stream ended: its reason (END_REASONS) becomes the close
  // reason; a system error is finished by name.
  #onEnd(reason, err, errnoName) {
    if (this[kPhase] === 'closed') return;
    switch (reason) {
      case END_REASONS.TRUNCATED: this[kFinish]('truncated', err); break;
      case END_REASONS.RING_CORRUPT: this[kFinish]('protocol-error', err); break;
      case END_REASONS.OUT_OF_MEMORY: this[kFinish]('error', err); break;
      case END_REASONS.MESSAGE_TOO_LARGE:
      case END_REASONS.SEGMENT_PROTOCOL: this[kFinish]('framing-error', err); break;
      case END_REASONS.SYSTEM_ERROR: this[kFinish]('peer-closed', null, errnoName || 'EIO'); break;
      default: this[kFinish]('peer-closed', null);
    }
  }

  // Closes the handle and settles everything that waits on the channel.
  // errnoName: a failed system call's errno name ('EPIPE'), if one ended it.
  [kFinish](reason, err, errnoName) {
    if (this[kPhase] === 'closed') return;
    // A channel still connecting belongs to a connect() whose promise
    // delivers its error: no 'error' event or process warning besides.
    const wasConnecting = this[kPhase] === 'connecting';
    if (errnoName !== undefined && this[kPhase] === 'connecting') {
      reason = 'error';
      err = systemError('ERR_PROCWIRE_CONNECT_FAILED', errnoName, 'connect');
    } else if (errnoName !== undefined) {
      const sys = systemError('ERR_PROCWIRE_SOCKET', errnoName, 'socket');
      // A reset or broken pipe is how a crashed peer looks: a close reason,
      // not an error of ours.
      if (sys.syscallCode === 'ECONNRESET' || sys.syscallCode === 'EPIPE') reason = 'peer-reset';
      else { reason = 'error'; err = err || sys; }
    }
    if (this[kPhase] === 'connecting' && reason !== 'local' && reason !== 'destroyed') {
      err = err || makeError('ERR_PROCWIRE_CONNECT_FAILED', 'connection failed');
    }
    this[kFinalCounters] = this.#counters();
    this[kPhase] = 'closed';
    this[kSegments].stop();
    // A handle still waiting for its answer is let go, as Node closes it on
    // disconnect.
    if (this[kHandles] !== null) this[kHandles].release();
    if (debug.enabled) debug('channel %s closed: %s%s', this.transport, reason, err ? ` (${err.code}: ${err.message})` : '');
    const [cbs, written] = this[kWriter].detach();
    this[kHandle].close();
    const requests = this[kRequests];
    const ids = requests.ids();
    // Made here, where its stack says who closed the channel, but only when
    // a send's callback or a request will get it: a channel that ends with
    // nothing in flight (most do, a process's last act) would pay for an
    // error and its coded class for nothing.
    const unsent = cbs.some(([end]) => end > written);
    const closedError = unsent || ids.length > 0
      ? makeError('ERR_PROCWIRE_CHANNEL_CLOSED', `channel closed (${reason})`, err || undefined, { reason })
      : null;
    process.nextTick(() => {
      for (const [end, cb] of cbs) cb(end <= written ? null : closedError);
      settleClosed(this, ids, (message = closedError.message) =>
        makeError('ERR_PROCWIRE_CHANNEL_CLOSED', message, err || undefined, { reason }),
      (id, e) => requests.settle(id, e));
      if (err && reason !== 'local' && !wasConnecting) this[kEmitError](err);
      this.emit('disconnect');
      this.emit('close', reason, err || undefined);
    });
  }
}

module.exports = { Channel };
