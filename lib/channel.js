'use strict';
// Channel: one class for every transport (fork socketpair, named unix socket,
// TCP). The socket, framing and codec live in the addon (NativeChannel); this
// file holds policy: backpressure, callbacks, request/reply, lifecycle.

const EventEmitter = require('events');
const { binding } = require('./native');
const { makeError, systemError, nodeError } = require('./errors');
const { kWriteFailed } = require('./write-failure');
const codec = require('./codec');
const fastCodec = require('./codec/advanced-fast');
const { HandleProtocol, handleType, discardHandle } = require('./child-process-ipc');
const { CMD, CAPABILITIES_VERSION, RINGS_VERSION, isInternal } = require('./protocol');
const { checkHandle, END_REASONS } = require('./transport/contract');
const { publicStats } = require('./stats');
const { withCallerFrames, timeoutMessage, settleClosed } = require('./error-context');
const { debug } = require('./debug');
const {
  invalidArg, validateObject, validateSerialization, validateMaxMessageSize, validateSize,
  validateMessage, validateFunction,
} = require('./validate');

// send() returns false once this many bytes wait to be written, and 'drain'
// follows when the queue is back under it. Node's own IPC uses 128 KiB with
// no 'drain'; a larger mark keeps a pipelining sender busy between ticks.
const DEFAULT_HIGH_WATER_MARK = 1024 * 1024;
// Past this many queued bytes the channel is closed (ERR_PROCWIRE_QUEUE_LIMIT).
const DEFAULT_MAX_QUEUED_BYTES = 1024 * 1024 * 1024;
// Messages that arrive while nobody listens are kept (as Node does) up to this
// many; past it the channel stops reading until a listener comes, so the peer
// sees backpressure instead of our memory growing.
const MAX_BACKLOG = 10000;
// ... and up to this many bytes (frame bytes, segments included): 10,000
// large messages would otherwise be a backlog of gigabytes.
const MAX_BACKLOG_BYTES = 64 * 1024 * 1024;
// Requests answered at once by respond(); more wait in arrival order, and
// past MAX_WAITING_REQUESTS waiting ones reading pauses (the peer feels
// backpressure). Nothing is dropped.
const DEFAULT_MAX_CONCURRENT_REQUESTS = 1024;
const MAX_WAITING_REQUESTS = 1024;

// From this many bytes a view goes through shared memory rather than the
// socket (procwire peers on unix sockets). Measured crossover on a 2-core VM:
// see bench/latency.js and the README; below it the memfd set-up costs more
// than copying the bytes through the socket.
const DEFAULT_OUT_OF_LINE_THRESHOLD = 256 * 1024;
// Segments sent but not yet acknowledged by the peer: past this, send()
// returns false (their bytes count towards highWaterMark and maxQueuedBytes
// too). Each is a descriptor in flight, and the kernel caps those per user.
const DEFAULT_MAX_SEGMENTS_IN_FLIGHT = 128;
// Recycled segments (segmentPool): at most this many bytes and segments of
// pre-faulted shared memory per channel and direction, idle or in flight.
// Past the bound a message takes a fresh sealed segment instead. Four 64 MiB
// messages in flight fit, and so do many small ones.
const DEFAULT_SEGMENT_POOL_BYTES = 256 * 1024 * 1024;
const DEFAULT_SEGMENT_POOL_COUNT = 16;
// Idle recycled segments are dropped (and the peer told to unmap them) once
// no segment came back for this many ms.
const DEFAULT_SEGMENT_POOL_IDLE = 5000;
// The buffers a native advanced channel's small frames are copied into for
// JavaScript to decode (decodeSmallFrames): a batch's frames past either
// bound are decoded by the addon instead.
const SMALL_FRAME_BYTES = 64 * 1024;
const SMALL_FRAME_COUNT = 1024;
// The messages of a tick after its first are encoded back to back into a
// staging buffer of this size and handed to the addon in one call per
// batch (see _write). A batch goes at the latest after STAGE_MAX_FRAMES
// messages, so a peer reading the ring starts on it while this side
// encodes the rest, or when less than STAGE_MIN_ROOM bytes are left.
const STAGE_BYTES = 64 * 1024;
const STAGE_MAX_FRAMES = 16;
const STAGE_MIN_ROOM = 4096;
// The receiver maps at most this many times its own segmentPoolMaxBytes of
// a peer's recycled segments (set both ends' bounds alike).
const MAX_MAPPED_FACTOR = 4;
// A SEGRET or SEGDROP message names at most this many ids.
const MAX_SEGMENT_IDS = 4096;
// A request with no reply in this many ms rejects (ERR_PROCWIRE_REQUEST_TIMEOUT),
// so a peer that never answers cannot hang the caller and keep its process
// alive for ever. Per channel `requestTimeout`, per request `timeout`; 0: none.
const DEFAULT_REQUEST_TIMEOUT = 30000;
const MAX_TIMEOUT = 2 ** 31 - 1;
// A request timer this late (ms) fired after a blocked loop: replies already
// received by the kernel are read before the request is called timed out.
const LATE_LOOP_MS = 20;
const SEGMENT_ACK = CMD.SEGMENT_ACK;
// Sent first by an end that can receive shared-memory segments; the other end
// sends out of line only after it arrives.
const CAPABILITIES = CMD.CAPABILITIES;
const OUT_OF_LINE_MODES = ['auto', 'always', 'never'];

// Node routes objects whose `cmd` starts with NODE_ to 'internalMessage'
// (cluster and handle passing use them); procwire does the same, and uses the
// prefix for its own request/reply so a plain Node peer never sees them as
// user messages (isInternal, lib/protocol.js).
const REQUEST = CMD.REQUEST;
const RESPONSE = CMD.RESPONSE;

function flushTick(channel) {
  channel._flush();
}

// Open channels that have sent: those whose sends of this tick wait for
// flushTick are written out at exit. Node's pipe writes as soon as send()
// is called, so a message sent just before process.exit() reaches the peer;
// procwire gathers a tick's sends into one write on the next tick, which
// exit() never reaches. One 'exit' listener for all channels (not one each:
// a parent may hold hundreds) writes them out then. A channel joins at its
// first send and leaves when it closes, not at every flush (adding and
// removing it once per tick cost more than the flush's own bookkeeping).
const sendingChannels = new Set();
let exitListening = false;

function flushAtExit() {
  for (const channel of sendingChannels) {
    if (channel._flushScheduled) channel._flush();
  }
}

// A value nested too deeply for the serializer's recursion (V8's and
// JSON's both overflow the stack, about 10,000 levels on a default stack)
// fails send() with procwire's code, the RangeError as its cause; nothing
// of it was queued, so the channel goes on.
function tooDeep(err) {
  if (!(err instanceof RangeError) || err.code !== undefined) return err;
  return makeError('ERR_PROCWIRE_UNSERIALIZABLE', `the message cannot be serialized: ${err.message}`, err);
}

class Channel extends EventEmitter {
  // Internal: made by fork(), listen() and connect(), never by users.
  // fd: a connected (or connecting) non-blocking stream socket this channel now owns.
  // Called from user code with anything else, it throws a coded error (the
  // addon's constructor checks the descriptor too), never aborts.
  constructor(fd, options) {
    super();
    options = validateObject(options, 'options');
    if (typeof options.createHandle !== 'function' && !(Number.isInteger(fd) && fd >= 0 && fd < 2 ** 31)) {
      throw invalidArg('Channel is made by fork(), listen() and connect(); it needs a socket descriptor');
    }
    const settings = channelSettings(options);
    this.serialization = settings.serialization;
    this.maxMessageSize = settings.maxMessageSize;
    this.highWaterMark = settings.highWaterMark;
    this.maxQueuedBytes = settings.maxQueuedBytes;
    this.requestTimeout = settings.requestTimeout;
    this.transport = options.transport || 'socket';
    const threshold = settings.outOfLineThreshold;
    // Only a procwire peer on a unix socket can take descriptors and knows
    // the segment references; everyone else gets every byte inline.
    this.outOfLine = options.segments && this.serialization === 'advanced' ? settings.outOfLine : 'never';
    const rings = settings.rings;
    const nativeThreshold = this.outOfLine === 'never' ? -1 : this.outOfLine === 'always' ? 0 : threshold;
    this.peer = options.peer || null;
    this._pushed = 0;
    this._written = 0;
    this._callbacks = [];        // [byteOffset, callback] in write order
    this._flushScheduled = false;
    this._sendingListed = false;  // in sendingChannels (see there)
    this._needDrain = false;
    this._state = options.connecting ? 'connecting' : 'open';
    this._closeReason = null;
    this._closeError = null;
    this._backlog = [];
    // Small frames the addon left to JavaScript that failed to decode.
    this._decodeErrorsInJs = 0;
    this._backlogSizes = [];
    this._backlogBytes = 0;
    this._readPausedByBacklog = false;
    this.maxConcurrentRequests = settings.maxConcurrentRequests;
    this._answering = 0;
    this._waitingRequests = [];
    this._readPausedByRequests = false;
    // While set (during the hello), every message goes here and nowhere
    // else: see lib/auth.js.
    this._gate = null;
    this._userPaused = false;
    this._requests = new Map();
    this._nextRequestId = 1;
    this._responder = null;
    this._unanswered = [];  // requests that came before any responder, for one turn
    this._refPolicy = options.refPolicy || 'always';
    this._refed = true;
    // Set while bytes wait to be written: like a pending write on Node's
    // pipe, they keep the process alive whatever the ref policy says, so a
    // child that sends and then runs out of work does not exit before its
    // message is out.
    this._writeHeld = false;
    const callbacks = {
      onread: (messages, errors, segments, segmentBytes, frameBytes, fds, smallFrames) => {
        if (smallFrames > 0) decodeSmallFrames(messages, this._smallBytes, this._smallFrames, smallFrames);
        this._onRead(messages, errors, segments, segmentBytes, frameBytes, fds);
      },
      // Recycled segments whose Buffers were collected: hand them back.
      onsegmentreturn: (ids) => this._returnSegments(ids),
      onwrite: (written) => this._onWritten(written),
      onend: (reason, err, errnoName) => this._onEnd(reason, err, errnoName),
      onconnect: () => this._onConnect(),
      // The protected interface a backend uses instead of Channel's
      // internals (lib/transport/contract.js documents each).
      onrequest: (id, body) => this._answer({ cmd: REQUEST, id, body }),
      onresponse: (id, ok, bodyOrError) => this._onResponse(id, ok, bodyOrError),
      onrequestfailed: (id, err) => this._settleRequest(id, err),
      onerror: (err) => this._emitError(err),
      onfail: (err) => this._finish('error', err),
    };
    // A transport that is not a socket descriptor (TLS, a message broker, the
    // pure-JS fallback) supplies its own handle through createHandle; every
    // handle keeps the contract of lib/transport/contract.js.
    // [segment bytes sent, segments sent], written by the addon; with the
    // peer's acknowledgements they give the shared memory in flight.
    this._segmentCounters = this.outOfLine === 'never' ? null : new Float64Array(2);
    this._segmentBytesAcked = 0;
    this._segmentsAcked = 0;
    this.maxSegmentsInFlight = settings.maxSegmentsInFlight;
    // Recycled, writable segments: by default only between a parent and its
    // own forked child, which already trust each other (docs/rings.md).
    this.segmentPool = settings.segmentPool === undefined ? this.transport === 'fork' : settings.segmentPool;
    this.segmentPoolMaxBytes = settings.segmentPoolMaxBytes;
    this.segmentPoolMaxCount = settings.segmentPoolMaxCount;
    this.segmentPoolIdleTimeout = settings.segmentPoolIdleTimeout;
    this._poolSending = false;
    this._poolTimer = null;
    this._handle = typeof options.createHandle === 'function'
      ? options.createHandle(callbacks, { serialization: this.serialization, maxMessageSize: this.maxMessageSize })
      : this._segmentCounters === null
        ? new binding.NativeChannel(fd, codec.codecFor(this.serialization).id, this.maxMessageSize,
          Boolean(options.connecting), callbacks, nativeThreshold)
        : new binding.NativeChannel(fd, codec.codecFor(this.serialization).id, this.maxMessageSize,
          Boolean(options.connecting), callbacks, nativeThreshold, this._segmentCounters);
    this._caps = checkHandle(this._handle, this.transport);
    // The advanced format's JavaScript encoder writes most messages in a
    // fraction of ValueSerializer's time; a native handle that takes frames
    // so encoded (writeFrame) gets those, and whatever that encoder declines
    // goes through write() as before. Views from the out-of-line threshold
    // on are declined too, so the native encoder may still send them in
    // shared memory. -1: never.
    this._fastMaxView = this.serialization === 'advanced' && typeof options.createHandle !== 'function' &&
      typeof this._handle.writeFrame === 'function' ? (nativeThreshold < 0 ? Infinity : nativeThreshold) : -1;
    // Frames so encoded wait in the staging buffer (see _write) until
    // _unstage hands them over; _pushed counts them already. The largest
    // payload the handle takes is mirrored here, so a staged frame is held
    // to it as the addon holds every other.
    this._stage = null;
    this._stagedBytes = 0;
    // How many writes into the handle are encoding a message right now. A
    // getter of that message may send() too; Node's serializer runs the
    // getter before its own write, so the getter's message goes first, and
    // a write while this is above 0 is never staged behind it.
    this._writesEncoding = 0;
    this._stagedFrames = 0;
    this._writeLimit = this.maxMessageSize;
    if (this._fastMaxView >= 0 && typeof this._handle.writeStaged === 'function') {
      this._stage = Buffer.allocUnsafeSlow(STAGE_BYTES);
      this._handle.stageFrames(this._stage);
    }
    // Small advanced frames are decoded here by the same fast path, in one
    // batch per read, rather than by a ValueDeserializer set up per message
    // in the addon (see decodeSmallFrames). The addon copies them into
    // these two buffers, this channel's for its whole life.
    this._smallBytes = null;
    this._smallFrames = null;
    if (this.serialization === 'advanced' && typeof options.createHandle !== 'function' &&
        typeof this._handle.decodeInJs === 'function') {
      this._smallBytes = Buffer.allocUnsafeSlow(SMALL_FRAME_BYTES);
      this._smallFrames = new Uint32Array(3 * SMALL_FRAME_COUNT);
      this._handle.decodeInJs(this._smallBytes, this._smallFrames);
    }
    this._handle.owner = this;
    this._peerTakesSegments = false;
    // Say what we can receive. Only native channels that may use segments
    // do; a plain Node peer never gets procwire's internal messages this way.
    this._canTakeSegments = this._segmentCounters !== null && typeof options.createHandle !== 'function' &&
      typeof this._handle.enableOutOfLine === 'function';
    // Shared-memory rings: only between procwire ends on a unix socket this
    // process reads natively (fork channels, named unix channels).
    this._ringsOffered = rings === 'auto' && options.segments === true && typeof options.createHandle !== 'function' &&
      (this.transport === 'fork' || this.transport === 'unix') && typeof this._handle.enableRings === 'function';
    this._ringsStarted = false;
    this._ringsPending = false;
    // A channel that runs the authenticated hello (options.hello: this end's
    // role) accepts a ring from the peer only once the hello is done, so
    // nothing is mapped for a peer that has not proved itself; the server
    // then sets up its own ring only in answer to the client's (see
    // docs/protocol.md, "Control frame: ring set-up"). Any other channel
    // accepts one from the start: the peer's set-up may arrive in the same
    // read as its capabilities.
    this._helloRole = options.hello === 'client' || options.hello === 'server' ? options.hello : null;
    this._helloDone = false;
    if (this._ringsOffered && this._helloRole === null) this._handle.allowRings();
    // This end takes recycled segments (and future-write-sealed transfers)
    // when it trusts the peer not to change bytes after sending them.
    this._acceptsPool = this._canTakeSegments && this.segmentPool && typeof this._handle.acceptSegmentPool === 'function';
    // A receiver maps at most this much of the peer's recycled segments at
    // once (the peer's pool, plus segments it dropped that we have not yet
    // heard about); past it a new segment is refused.
    if (this._acceptsPool) this._handle.acceptSegmentPool(MAX_MAPPED_FACTOR * this.segmentPoolMaxBytes);
    if (this._canTakeSegments || this._ringsOffered) {
      const caps = this._ringsOffered
        ? { cmd: CAPABILITIES, v: CAPABILITIES_VERSION, segments: this._canTakeSegments, rings: RINGS_VERSION }
        : { cmd: CAPABILITIES, v: CAPABILITIES_VERSION, segments: true };
      if (this._acceptsPool) caps.pool = true;
      this._sendInternal(caps);
    }
    // Handles (descriptors beside a NODE_HANDLE frame) need a unix socket
    // this process reads natively: fork channels and named unix channels.
    this._takesHandles = typeof options.createHandle !== 'function' &&
      (this.transport === 'fork' || this.transport === 'unix') && typeof this._handle.acceptHandles === 'function';
    this._handleHook = null;
    this._consumer = null;
    this._handles = null;
    if (this._takesHandles) {
      this._handle.acceptHandles();
      this._handles = new HandleProtocol(this, this, (message, handle, internal) =>
        this._deliverWithHandle(message, handle, internal));
    }
    this.on('newListener', (event) => {
      if (event === 'message' && this._backlog.length > 0) process.nextTick(() => this._drainBacklog());
      if (event === 'message' || event === 'disconnect') process.nextTick(() => this._applyRefPolicy());
    });
    this.on('removeListener', () => process.nextTick(() => this._applyRefPolicy()));
    this._applyRefPolicy();
  }

  get connected() {
    return this._state === 'open' || this._state === 'connecting';
  }

  get closed() {
    return this._state === 'closed';
  }

  // Bytes queued but not yet handed to the kernel, plus shared-memory bytes
  // the peer has not yet taken.
  get writableLength() {
    return this._pushed - this._written + this._segmentBytesInFlight();
  }

  _segmentBytesInFlight() {
    return this._segmentCounters === null ? 0 : this._segmentCounters[0] - this._segmentBytesAcked;
  }

  _overHighWaterMark() {
    return this.writableLength >= this.highWaterMark ||
      (this._segmentCounters !== null && this._segmentCounters[1] - this._segmentsAcked >= this.maxSegmentsInFlight);
  }

  get writableNeedDrain() {
    return this._needDrain;
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
    if ((handle !== undefined && handle !== null) || (this._handles !== null && this._handles.host._handleQueue)) {
      return this._send(message, handle, options, callback);
    }
    return this._sendNow(message, options, callback);
  }

  // Node's _send: a message with a handle goes through the handle protocol
  // (and so does everything sent while a handle waits for its answer).
  _send(message, handle, options, callback) {
    if (this._handles === null) {
      if (handle !== undefined && handle !== null) {
        if (handleType(handle) === null) throw nodeError('ERR_INVALID_HANDLE_TYPE');
        throw makeError('ERR_PROCWIRE_HANDLE_UNSUPPORTED',
          `a ${this.transport} channel cannot pass handles; only unix sockets (fork, named channels) can`);
      }
      return this._sendNow(message, options, callback);
    }
    validateMessage(message);
    return this._handles.send(message, handle, options || {}, callback,
      (m, o, cb) => this._sendNow(m, o && o.transfer !== undefined ? o : undefined, cb));
  }

  _sendNow(message, options, callback) {
    validateMessage(message);
    if (this._ringsPending && this._ringsMayStart()) this._startRings();
    if (this._state !== 'open' && this._state !== 'connecting') return this._refuseSend(callback, true);
    const transfer = options && options.transfer !== undefined ? transferList(options.transfer) : undefined;
    if (transfer !== undefined) {
      // Refused before anything is detached: the encoder detaches while
      // encoding, and the size check after it would come too late.
      let bytes = 0;
      for (const ab of transfer) bytes += ab.byteLength;
      if (bytes > this.maxMessageSize) {
        throw makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
          `transferred buffers of ${bytes} bytes exceed maxMessageSize (${this.maxMessageSize} bytes); nothing was sent`);
      }
    }
    // Throws (coded) if the value cannot be encoded; nothing is queued then.
    if (transfer === undefined) {
      this._pushed = this._write(message);
    } else {
      this._unstage();
      this._pushed = this._encodingWrite('write', message, transfer);
    }
    // A getter of the message destroyed the channel (its pending callbacks
    // are settled already).
    if (this._state === 'closed') return this._refuseSend(callback, true);
    if (callback) this._callbacks.push([this._pushed, callback]);
    this._scheduleFlush();
    const queued = this.writableLength;
    if (queued > this.maxQueuedBytes) {
      const err = makeError('ERR_PROCWIRE_QUEUE_LIMIT',
        `${queued} bytes queued or in flight, over maxQueuedBytes (${this.maxQueuedBytes})`);
      process.nextTick(() => this._finish('error', err));
      return false;
    }
    if (this._overHighWaterMark()) {
      this._needDrain = true;
      return false;
    }
    return true;
  }

  // Handle passing: writes `message` (a NODE_HANDLE wrapper) as one frame
  // with a copy of `fd` riding on its first byte, as Node's IPC does.
  _sendWithDescriptor(message, fd, callback) {
    if (this._state !== 'open' && this._state !== 'connecting') return this._refuseSend(callback, false);
    const bytes = codec[this.serialization].encode(message);
    if (this._state === 'closed') return this._refuseSend(callback, false);  // as in _sendNow
    this._unstage();
    this._pushed = this._handle.writeBuffer(bytes, [fd]);
    if (callback) this._callbacks.push([this._pushed, callback]);
    this._scheduleFlush();
    return !this._overHighWaterMark();
  }

  // A send the channel can no longer take -> false: its callback gets the
  // close error on a later tick, or else (emit) 'error' does.
  _refuseSend(callback, emit) {
    const err = makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'channel closed');
    if (callback) process.nextTick(callback, err);
    else if (emit) process.nextTick(() => this._emitError(err));
    return false;
  }

  // NODE_HANDLE_ACK / NACK: not the user's messages, so never an error of
  // theirs, and never queued behind the handle they answer.
  _sendAnswer(message) {
    this._sendInternal(message);
  }

  // A plain message for the child_process surface: errors go to the
  // callback, or to onError unless swallowed, as Node's _send does.
  // sendOptions: procwire's own send options ({ transfer }), or undefined.
  _sendPlain(message, callback, swallowErrors, onError, sendOptions) {
    if (this._state !== 'open' && this._state !== 'connecting') {
      const err = makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'channel closed');
      if (typeof callback === 'function') process.nextTick(callback, err);
      else if (!swallowErrors) process.nextTick(onError, err);
      return false;
    }
    return this._sendNow(message, sendOptions, typeof callback === 'function' ? callback : undefined);
  }

  // The descriptor of the socket (undefined once closed), as Node's
  // child.channel.fd.
  get fd() {
    if (this._state === 'closed' || typeof this._handle.fd !== 'function') return undefined;
    return this._handle.fd();
  }

  // A message that came with a handle (or was queued behind one), for this
  // channel's own listeners.
  _deliverWithHandle(message, handle, internal) {
    if (this._state === 'closed') {
      discardHandle(handle);
      return;
    }
    if (internal) {
      this.emit('internalMessage', message, handle);
      return;
    }
    if (this._backlog.length > 0 || !this._hasMessageTaker()) {
      this._backlog.push(new WithHandle(message, handle));
      this._backlogSizes.push(0);
      return;
    }
    this._emitMessage(message, handle);
  }

  // Writes pre-built frames as they are, optionally with descriptors (tests
  // of hostile input).
  _sendRaw(bytes, fds) {
    // The native handle CHECKs that it is open and got bytes; a closed channel
    // or a bad argument is refused here with a coded error instead.
    if (this._state !== 'open' && this._state !== 'connecting') {
      throw makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'channel closed');
    }
    if (!ArrayBuffer.isView(bytes)) throw invalidArg('bytes must be a Buffer or an ArrayBufferView');
    if (fds !== undefined && (!Array.isArray(fds) || !fds.every((fd) => Number.isInteger(fd) && fd >= 0 && fd <= 0x7fffffff))) {
      throw invalidArg('fds must be an array of descriptors');
    }
    this._unstage();
    this._pushed = fds === undefined ? this._handle.writeBuffer(bytes) : this._handle.writeBuffer(bytes, fds);
    this._scheduleFlush();
  }

  // request(value, { timeout, signal }) -> Promise of the peer's reply.
  request(value, options) {
    options = validateObject(options, 'options');
    const timeout = validateSize(options.timeout, 'timeout', this.requestTimeout, MAX_TIMEOUT);
    const signal = options.signal;
    if (signal !== undefined && (signal === null || typeof signal.aborted !== 'boolean')) {
      throw invalidArg('options.signal must be an AbortSignal');
    }
    if (signal && signal.aborted) {
      return Promise.reject(makeError('ERR_PROCWIRE_REQUEST_ABORTED', 'request aborted', signal.reason));
    }
    if (this._state !== 'open' && this._state !== 'connecting') {
      return Promise.reject(makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'channel closed'));
    }
    const id = this._nextRequestId++;
    // A rejection's stack gains the awaiting caller's frames (error-context.js).
    return withCallerFrames(new Promise((resolve, reject) => {
      const entry = { resolve, reject, timer: null, signal, onAbort: null };
      if (timeout > 0) {
        const deadline = Date.now() + timeout;
        entry.timer = setTimeout(() => {
          // A timer that fires late means this process's loop was blocked;
          // a reply that came meanwhile waits unread in the socket, and is
          // read in this same loop turn (poll, before setImmediate). Only
          // then is the peer called silent; the error's loopDelay tells a
          // late loop from a dead peer.
          const loopDelay = Math.max(0, Date.now() - deadline);
          const timedOut = () => {
            const err = makeError('ERR_PROCWIRE_REQUEST_TIMEOUT', timeoutMessage(this, timeout) +
              (loopDelay >= LATE_LOOP_MS ? ` (this process's event loop was ${loopDelay} ms late)` : ''));
            err.loopDelay = loopDelay;
            this._settleRequest(id, err);
          };
          if (loopDelay >= LATE_LOOP_MS) setImmediate(timedOut);
          else timedOut();
        }, timeout);
        // A pending timer must not be what keeps a process alive on its own;
        // the channel's own ref decides that.
        if (!this._refed) entry.timer.unref();
      }
      if (signal) {
        entry.onAbort = () => this._settleRequest(id,
          makeError('ERR_PROCWIRE_REQUEST_ABORTED', 'request aborted', signal.reason));
        signal.addEventListener('abort', entry.onAbort, { once: true });
      }
      this._requests.set(id, entry);
      try {
        if (this._caps.requests) this._writeRequest(id, value);
        else this.send({ cmd: REQUEST, id, body: value });
      } catch (err) {
        this._settleRequest(id, err);
      }
    }));
  }

  // respond(async (value, channel) => reply): answers the peer's requests.
  respond(handler) {
    this._responder = handler === null ? null : validateFunction(handler, 'handler');
    if (this._responder !== null && this._unanswered.length > 0) {
      const held = this._unanswered;
      this._unanswered = [];
      for (const message of held) this._answer(message);
    }
    // A child whose only job is answering requests must stay alive for them.
    this._applyRefPolicy();
    return this;
  }

  // Flushes what is queued, then closes. Idempotent.
  close() {
    if (this._state === 'closed' || this._state === 'closing') return;
    this._state = 'closing';
    if (this._pushed === this._written) {
      this._finish('local', null);
    } else {
      this._scheduleFlush();
    }
  }

  // Closes now; queued messages are dropped (their callbacks get the error).
  destroy(err) {
    if (this._state === 'closed') return;
    this._finish('destroyed', err || null);
  }

  disconnect() {
    this.close();
  }

  ref() {
    this._refPolicy = 'always';
    this._applyRefPolicy();
    return this;
  }

  unref() {
    this._refPolicy = 'never';
    this._applyRefPolicy();
    return this;
  }

  // Stops reading (the peer gets backpressure) until resume().
  pause() {
    this._userPaused = true;
    if (this._state !== 'closed') this._handle.readStop();
    return this;
  }

  resume() {
    this._userPaused = false;
    this._maybeResumeReading();
    return this;
  }

  // Reading restarts only when nothing holds it: the user, the backlog and
  // the queue of waiting requests each pause it on their own.
  _maybeResumeReading() {
    if (this._state !== 'closed' && !this._userPaused && !this._readPausedByBacklog && !this._readPausedByRequests) {
      this._handle.readStart();
    }
  }

  // The largest payload the handle accepts from now on (the hello runs under
  // a small one). false: a frame already buffered is over it, and the
  // channel is closed with a framing error.
  _setReadLimit(bytes) {
    if (this._state === 'closed' || typeof this._handle.setMaxMessageSize !== 'function') return true;
    this._writeLimit = bytes;
    if (this._handle.setMaxMessageSize(bytes)) return true;
    const err = makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
      `a partially received frame exceeds the ${bytes}-byte limit now in force`);
    process.nextTick(() => this._finish('framing-error', err));
    return false;
  }

  stats() {
    if (this._state === 'closed') return this._finalStats || null;
    this._unstage();
    return publicStats(this._handle.stats(), {
      pendingRequests: this._requests.size,
      // On when both ends can: this end allows it and the peer said so.
      outOfLineEnabled: this.outOfLine !== 'never' && this._peerTakesSegments,
      decodeErrorsInJs: this._decodeErrorsInJs,
    });
  }

  // ---- internals ----------------------------------------------------------

  _applyRefPolicy() {
    if (this._state === 'closed') return;
    let want;
    if (this._writeHeld || this._refPolicy === 'always') want = true;
    else if (this._refPolicy === 'never') want = false;
    // 'listeners': like Node's child side of an IPC channel, keep the process
    // alive only while someone listens, a responder is registered, or a
    // request is in flight.
    else {
      want = this._hasMessageTaker() || this.listenerCount('disconnect') > 0 ||
        this._responder !== null || this._requests.size > 0;
    }
    if (want === this._refed) return;
    this._refed = want;
    if (want) this._handle.ref(); else this._handle.unref();
  }

  _scheduleFlush() {
    if (this._flushScheduled) return;
    this._flushScheduled = true;
    if (!this._sendingListed) {
      this._sendingListed = true;
      sendingChannels.add(this);
      if (!exitListening) {
        exitListening = true;
        process.once('exit', flushAtExit);
      }
    }
    // Everything sent in this tick goes out in one gathered write.
    process.nextTick(flushTick, this);
  }

  _flush() {
    this._flushScheduled = false;
    if (this._state === 'closed') return;
    this._unstage();
    if (this._state === 'closed') return;
    const written = this._handle.flush();
    if (typeof written === 'string') {
      // The fork surface reports this as Node's send() does (EPIPE).
      if (this[kWriteFailed] !== undefined) {
        this[kWriteFailed](written, typeof this._handle.written === 'function' ? this._handle.written() : this._written);
      }
      if (this._peerGoneWhileReading(written)) return;
      this._finish('peer-closed', null, written);
      return;
    }
    this._onWritten(written);
  }

  // A write that finds the peer gone (it wrote, then closed) must not drop
  // what the peer sent before: that is still in our socket's buffer, and
  // Node's channel reads it, end of file last, before it disconnects. So a
  // channel that is reading leaves the close to the read side, which sees
  // the end after those messages. One that is not reading would never see
  // it, and closes at once.
  _peerGoneWhileReading(errnoName) {
    if (errnoName !== 'EPIPE' && errnoName !== 'ECONNRESET') return false;
    if (this._state !== 'open' || (this.transport !== 'fork' && this.transport !== 'unix')) return false;
    return !this._userPaused && !this._readPausedByBacklog && !this._readPausedByRequests;
  }

  _onWritten(written) {
    this._written = written;
    // The addon may queue a frame of its own (the server's ring set-up,
    // answering the client's), which the byte count written includes.
    if (written > this._pushed) this._pushed = written;
    const cbs = this._callbacks;
    let n = 0;
    while (n < cbs.length && cbs[n][0] <= written) n++;
    if (n > 0) {
      const done = cbs.splice(0, n);
      for (const [, cb] of done) cb(null);
    }
    this._maybeDrain();
    const waiting = this._pushed > this._written;
    if (waiting !== this._writeHeld) {
      this._writeHeld = waiting;
      this._applyRefPolicy();
    }
    if (this._state === 'closing' && this._pushed === this._written) this._finish('local', null);
  }

  _maybeDrain() {
    if (this._needDrain && !this._overHighWaterMark()) {
      this._needDrain = false;
      this.emit('drain');
    }
  }

  _onConnect() {
    if (this._state === 'connecting') this._state = 'open';
    this.emit('connect');
  }

  // frameBytes: the batch's frame bytes (inline and segments), for the
  // backlog's byte bound. fds: [messageIndex, fd, ...], the descriptors that
  // came with NODE_HANDLE messages of this batch (the addon only passes them
  // on channels that called acceptHandles()).
  _onRead(messages, errors, segments, segmentBytes, frameBytes, fds) {
    // Tell the sender its shared memory arrived, so it may send more.
    if (segments > 0) this._sendInternal({ cmd: SEGMENT_ACK, n: segments, bytes: segmentBytes });
    // Each message's share of the batch's bytes, for the backlog's byte
    // bound (handles that do not report bytes count none).
    const share = messages.length > 0 && typeof frameBytes === 'number' ? frameBytes / messages.length : 0;
    let e = 0;
    let f = 0;
    for (let i = 0; i < messages.length; i++) {
      // Once closed, the rest of the batch is dropped, but its descriptors
      // are still closed below.
      while (this._state !== 'closed' && errors !== undefined && e < errors.length && errors[e] === i) {
        // Before the hello completes a frame that fails to decode is the
        // gate's to judge (it fails the hello), not a user-visible event.
        if (this._gate !== null) this._gate(null); else this._reportDecodeError(errors[e + 1]);
        e += 2;
      }
      let fd;
      if (fds !== undefined && f < fds.length && fds[f] === i) {
        fd = fds[f + 1];
        f += 2;
      }
      if (messages[i] instanceof DecodeFailure) {
        // A small frame decoded in JavaScript that failed, reported in its
        // place as the addon reports its own (no descriptor rides on one).
        this._decodeErrorsInJs++;
        if (this._state === 'closed') continue;
        if (this._gate !== null) this._gate(null); else this._reportDecodeError(messages[i].error);
      } else if (this._state === 'closed' || this._gate !== null) {
        // No handle is taken before the hello completes, nor after close.
        if (fd !== undefined) binding.closeFd(fd);
        if (this._state === 'closed') continue;
        this._gate(messages[i]);
      } else {
        this._dispatch(messages[i], share, fd);
      }
    }
    if (this._state === 'closed') return;
    if (this._ringsPending && this._ringsMayStart()) this._startRings();
    while (errors !== undefined && e < errors.length) {
      if (this._gate !== null) this._gate(null); else this._reportDecodeError(errors[e + 1]);
      e += 2;
      if (this._state === 'closed') return;
    }
  }

  _dispatch(message, bytes, fd) {
    if (isInternal(message)) {
      this._onInternal(message, fd);
      return;
    }
    if (this._backlog.length > 0 || !this._hasMessageTaker()) {
      this._backlog.push(message);
      this._backlogSizes.push(bytes);
      this._backlogBytes += bytes;
      if ((this._backlog.length >= MAX_BACKLOG || this._backlogBytes >= MAX_BACKLOG_BYTES) &&
          !this._readPausedByBacklog) {
        this._readPausedByBacklog = true;
        this._handle.readStop();
      }
      return;
    }
    this._emitMessage(message, undefined);
  }

  // Whether a user message has somewhere to go now: a 'message' listener,
  // or the consumer of the surface built on this channel.
  _hasMessageTaker() {
    return this._consumer !== null || this.listenerCount('message') > 0;
  }

  // One user message to the consumer (if any), then to 'message' listeners.
  // The ChildProcess surface is the consumer: it takes every message as a
  // plain call, without EventEmitter's emit and its argument array.
  _emitMessage(message, handle) {
    if (this._consumer !== null) this._consumer(message, handle);
    if (this.listenerCount('message') > 0) {
      if (handle === undefined) this.emit('message', message);
      else this.emit('message', message, handle);
    }
  }

  // For lib/child-process-ipc.js: `consumer(message, handle)` receives the
  // channel's user messages from now on, in order, before 'message'
  // listeners do, and counts as one for the backlog and the ref policy.
  _setConsumer(consumer) {
    this._consumer = consumer;
    if (this._backlog.length > 0) process.nextTick(() => this._drainBacklog());
    process.nextTick(() => this._applyRefPolicy());
  }

  _drainBacklog() {
    while (this._backlog.length > 0 && this._hasMessageTaker() && this._state !== 'closed') {
      this._backlogBytes -= this._backlogSizes.shift();
      const item = this._backlog.shift();
      if (item instanceof WithHandle) this._emitMessage(item.message, item.handle);
      else this._emitMessage(item, undefined);
    }
    if (this._backlog.length === 0) this._backlogBytes = 0;
    if (this._backlog.length === 0 && this._readPausedByBacklog) {
      this._readPausedByBacklog = false;
      this._maybeResumeReading();
    }
  }

  _onInternal(message, fd) {
    if (this._handleHook !== null &&
        (message.cmd === CMD.HANDLE || message.cmd === CMD.HANDLE_ACK || message.cmd === CMD.HANDLE_NACK)) {
      this._handleHook(message, fd);
      return;
    }
    if (fd !== undefined) binding.closeFd(fd);
    if (message.cmd === REQUEST) {
      this._answer(message);
    } else if (message.cmd === RESPONSE) {
      this._onResponse(message.id, message.ok, message.ok ? message.body : message.error);
    } else if (message.cmd === CAPABILITIES) {
      if (debug.enabled) {
        debug('channel %s capabilities from peer: segments %s, pool %s, rings %s (ours: segments %s, rings %s)',
          this.transport, message.segments, message.pool, message.rings, this._canTakeSegments, this._ringsOffered);
      }
      if (message.segments === true && this._canTakeSegments && !this._peerTakesSegments) {
        this._peerTakesSegments = true;
        this._handle.enableOutOfLine();
        if (message.pool === true && this.segmentPool && typeof this._handle.enableSegmentPool === 'function') {
          this._poolSending = true;
          this._handle.enableSegmentPool(this.segmentPoolMaxBytes, this.segmentPoolMaxCount);
        }
      }
      // Rings start once both ends offered them and, on channels that run
      // the hello, the hello is done (until then the gate holds every
      // message).
      if (message.rings === RINGS_VERSION && this._ringsOffered && !this._ringsStarted) {
        if (this._ringsMayStart()) this._startRings(); else this._ringsPending = true;
      }
    } else if (message.cmd === SEGMENT_ACK) {
      // Numbers from the peer are checked before they touch our accounting:
      // NaN, Infinity, negatives or acks for more than was sent would break
      // backpressure for good.
      const n = message.n;
      const bytes = message.bytes;
      const sent = this._segmentCounters;
      if (!Number.isSafeInteger(n) || n < 0 || !Number.isSafeInteger(bytes) || bytes < 0 || sent === null ||
          this._segmentsAcked + n > sent[1] || this._segmentBytesAcked + bytes > sent[0]) {
        this._protocolError(`invalid segment acknowledgement (n: ${String(n)}, bytes: ${String(bytes)})`);
        return;
      }
      this._segmentsAcked += n;
      this._segmentBytesAcked += bytes;
      this._maybeDrain();
    } else if (message.cmd === CMD.SEGMENT_RETURN) {
      this._onSegmentsReturned(message.ids);
    } else if (message.cmd === CMD.SEGMENT_DROP) {
      // Ids we never mapped are ignored: dropping them cannot hurt us.
      if (this._acceptsPool && validSegmentIds(message.ids)) this._handle.forgetSegments(message.ids);
    } else if (message.cmd === CMD.HANDLE) {
      // A plain Node peer passed a handle. The descriptor was closed on
      // arrival; refuse in Node's own protocol so the sender does not wait
      // forever, and say so here.
      this._sendInternal({ cmd: CMD.HANDLE_NACK });
      this._emitError(makeError('ERR_PROCWIRE_HANDLE_UNSUPPORTED',
        `the peer sent a handle; a ${this.transport} channel cannot take handles`));
    } else {
      this.emit('internalMessage', message);
    }
  }

  _ringsMayStart() {
    return this._gate === null && (this._helloRole === null || this._helloDone);
  }

  // Called by lib/auth.js once the hello succeeded on this channel.
  _onHelloDone() {
    debug('channel %s hello done (%s)', this.transport, this._helloRole);
    this._helloDone = true;
    if (this._ringsPending && this._ringsMayStart()) this._startRings();
  }

  _startRings() {
    this._ringsPending = false;
    if (this._ringsStarted || (this._state !== 'open' && this._state !== 'connecting')) return;
    debug('channel %s rings starting (%s side)', this.transport, this._helloRole || 'fork');
    this._ringsStarted = true;
    if (this._helloRole === 'server') {
      // The client sets up its ring first, once its own hello is done; the
      // addon answers with ours as soon as it has mapped the client's.
      this._handle.allowRings(true);
      return;
    }
    if (this._helloRole === 'client') this._handle.allowRings();
    // Queues the ring set-up frame; the byte count includes it.
    this._unstage();
    this._pushed = this._handle.enableRings();
    this._scheduleFlush();
  }

  // The peer's reply: ok with its body, or not with its responder's error
  // ({ name, message, code, stack }).
  _onResponse(id, ok, bodyOrError) {
    if (!this._requests.has(id)) return;  // timed out or aborted already
    if (ok) {
      this._settleRequest(id, null, bodyOrError);
      return;
    }
    const remote = bodyOrError || {};
    if (remote.code === 'ERR_PROCWIRE_NO_RESPONDER') {
      this._settleRequest(id, makeError('ERR_PROCWIRE_NO_RESPONDER', 'peer has no responder'));
      return;
    }
    this._settleRequest(id, makeError('ERR_PROCWIRE_REMOTE_ERROR',
      `peer's responder failed: ${remote.message}`, undefined, { remote }));
  }

  // The addon says these recycled segments are no longer read here.
  _returnSegments(ids) {
    for (let i = 0; i < ids.length; i += MAX_SEGMENT_IDS) {
      this._sendInternal({ cmd: CMD.SEGMENT_RETURN, ids: ids.slice(i, i + MAX_SEGMENT_IDS) });
    }
  }

  // The peer handed recycled segments back. An id we did not send, or one
  // already back, means the peer is confused or hostile: the pool's
  // bookkeeping cannot be trusted any more, so the channel closes.
  _onSegmentsReturned(ids) {
    if (this._state === 'closed') return;
    if (!this._poolSending || !validSegmentIds(ids) || this._handle.recycleSegments(ids) !== true) {
      this._protocolError('invalid recycled segment return');
      return;
    }
    this._forgetDropped(this._handle.takeDroppedSegments() || []);
    // Idle from now on until the next return: trim when the timer fires.
    if (this._poolTimer !== null) clearTimeout(this._poolTimer);
    this._poolTimer = setTimeout(() => {
      this._poolTimer = null;
      if (this._state === 'open') this._forgetDropped(this._handle.trimSegments() || []);
    }, this.segmentPoolIdleTimeout);
    this._poolTimer.unref();
  }

  _forgetDropped(ids) {
    for (let i = 0; i < ids.length; i += MAX_SEGMENT_IDS) {
      this._sendInternal({ cmd: CMD.SEGMENT_DROP, ids: ids.slice(i, i + MAX_SEGMENT_IDS) });
    }
  }

  // The peer broke procwire's control protocol: the channel cannot be
  // trusted any more and is closed.
  _protocolError(message) {
    this._finish('protocol-error', makeError('ERR_PROCWIRE_PROTOCOL', message));
  }

  // One message to the handle's queue -> total bytes ever queued. Throws
  // (coded) if the value cannot be encoded; nothing is queued then.
  //
  // The first message since the last flush goes to the handle at once, so
  // it leaves within send() (see docs/channel.md); the ones after it in the
  // same tick are staged, and each batch crosses into the addon once.
  _write(message) {
    this._writesEncoding++;
    try {
      return this._writeEncoding(message);
    } catch (err) {
      throw tooDeep(err);
    } finally {
      this._writesEncoding--;
    }
  }

  // One of the handle's writes that encode the message in the addon
  // (write, writeRequest, writeResponse), counted in _writesEncoding while
  // it runs, as _write is.
  _encodingWrite(method, a, b, c) {
    this._writesEncoding++;
    try {
      return this._handle[method](a, b, c);
    } catch (err) {
      throw tooDeep(err);
    } finally {
      this._writesEncoding--;
    }
  }

  _writeEncoding(message) {
    if (this._fastMaxView < 0) return this._handle.write(message);
    if (this._stage !== null && this._flushScheduled && this._writesEncoding === 1) {
      const at = this._stagedBytes;
      const length = fastCodec.encodeAppend(this._stage, at, message, this._fastMaxView);
      if (length >= 0 && !fastCodec.spilled()) {
        if (length - 4 > this._writeLimit) {
          throw makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
            `message of ${length - 4} bytes exceeds maxMessageSize (${this._writeLimit} bytes); nothing was sent`);
        }
        // A getter that sent, or asked for stats(), handed the frames staged
        // before this one over meanwhile: this one moves up to what is
        // staged now (nothing; a nested write is never staged).
        if (this._stagedBytes !== at) this._stage.copyWithin(this._stagedBytes, at, at + length);
        this._stagedBytes += length;
        this._stagedFrames++;
        if (this._stagedFrames >= STAGE_MAX_FRAMES || STAGE_BYTES - this._stagedBytes < STAGE_MIN_ROOM) {
          return this._unstage();
        }
        return this._pushed + length;
      }
      // Everything else goes after what is staged.
      this._unstage();
      if (length >= 0) return this._handle.writeFrame(fastCodec.scratch(), length);
      return this._handle.write(message);
    }
    // A write from a getter of a message being encoded goes after what was
    // staged before that message, and before the message itself.
    if (this._writesEncoding > 1) this._unstage();
    const length = fastCodec.encodeToScratch(message, this._fastMaxView);
    if (length >= 0) return this._handle.writeFrame(fastCodec.scratch(), length);
    return this._handle.write(message);
  }

  // Writes out now what this tick's sends left for its flush; their
  // callbacks are still settled by that flush, never in here. For kill():
  // Node's pipe writes within send(), so everything sent before a signal is
  // in the socket when the signal goes, and its callback succeeds.
  _writeOutNow() {
    if (!this._flushScheduled || this._state === 'closed') return;
    this._unstage();
    if (this._state !== 'closed') this._handle.flush();
  }

  // Hands the staged frames to the addon -> total bytes ever queued. Only
  // running out of memory for their copy fails it; frames before it may
  // already be in the ring, so the rest cannot be sent in order, and the
  // channel closes with that error (outside send()).
  _unstage() {
    // A closed handle takes nothing: staged frames are dropped with it.
    if (this._stagedFrames === 0 || this._state === 'closed') return this._pushed;
    const bytes = this._stagedBytes;
    this._stagedBytes = 0;
    this._stagedFrames = 0;
    try {
      this._pushed = this._handle.writeStaged(bytes);
    } catch (err) {
      process.nextTick(() => this._finish('error', err));
    }
    return this._pushed;
  }

  _sendInternal(message) {
    if (this._state !== 'open' && this._state !== 'connecting') return;
    try {
      this._pushed = this._write(message);
      this._scheduleFlush();
    } catch (err) {
      this._emitError(err);
    }
  }

  // Requests beyond maxConcurrentRequests wait in order; a long queue of
  // waiting ones pauses reading until it shrinks.
  _answer(message) {
    if (this._answering >= this.maxConcurrentRequests) {
      this._waitingRequests.push(message);
      if (this._waitingRequests.length >= MAX_WAITING_REQUESTS && !this._readPausedByRequests) {
        this._readPausedByRequests = true;
        this._handle.readStop();
      }
      return;
    }
    this._answerNow(message);
  }

  _requestDone() {
    this._answering--;
    while (this._answering < this.maxConcurrentRequests && this._waitingRequests.length > 0 &&
           this._state !== 'closed') {
      this._answerNow(this._waitingRequests.shift());
    }
    if (this._readPausedByRequests && this._waitingRequests.length < MAX_WAITING_REQUESTS / 2) {
      this._readPausedByRequests = false;
      this._maybeResumeReading();
    }
  }

  _answerNow(message) {
    const id = message.id;
    if (this._responder === null) {
      // A request can arrive in the same read as the hello that admits the
      // channel, before the user's 'channel' handler (or the code after
      // `await connect()`) has called respond(): give it one turn of the
      // event loop before answering that there is no responder.
      this._unanswered.push(message);
      if (this._unanswered.length === 1) setImmediate(() => this._refuseUnanswered());
      return;
    }
    let result;
    this._answering++;
    try {
      result = this._responder(message.body, this);
    } catch (err) {
      result = Promise.reject(err);
    }
    Promise.resolve(result).then(
      (body) => {
        try {
          this._sendResponse(id, true, body, true);
        } catch (err) {
          // The reply itself could not be encoded: tell the requester.
          this._sendResponse(id, false, serializeError(err));
        }
      },
      (err) => this._sendResponse(id, false, serializeError(err)))
      .finally(() => this._requestDone());
  }

  _refuseUnanswered() {
    const held = this._unanswered;
    this._unanswered = [];
    for (const { id } of held) {
      this._sendResponse(id, false,
        { name: 'NoResponderError', message: 'no responder', code: 'ERR_PROCWIRE_NO_RESPONDER' });
    }
  }

  // A request through a backend with native request/reply (capability
  // `requests`): the same queueing and backpressure as send().
  _writeRequest(id, body) {
    if (this._state !== 'open' && this._state !== 'connecting') {
      throw makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'channel closed');
    }
    this._unstage();
    this._pushed = this._encodingWrite('writeRequest', id, body);
    this._scheduleFlush();
  }

  // A reply: ok with its body, or not with a serialized error. rethrow: an
  // encoding failure of the body is the caller's to handle (it answers with
  // the error instead); otherwise it goes to 'error'.
  _sendResponse(id, ok, bodyOrError, rethrow) {
    if (this._state !== 'open' && this._state !== 'connecting') return;
    try {
      this._unstage();
      this._pushed = this._caps.requests ? this._encodingWrite('writeResponse', id, ok, bodyOrError)
        : this._encodingWrite('write', ok ? { cmd: RESPONSE, id, ok, body: bodyOrError } : { cmd: RESPONSE, id, ok, error: bodyOrError });
      this._scheduleFlush();
    } catch (err) {
      if (rethrow) throw err;
      this._emitError(err);
    }
  }

  _settleRequest(id, err, value) {
    const entry = this._requests.get(id);
    if (entry === undefined) return;
    this._requests.delete(id);
    if (entry.timer) clearTimeout(entry.timer);
    if (entry.onAbort) entry.signal.removeEventListener('abort', entry.onAbort);
    if (err) entry.reject(err); else entry.resolve(value);
    if (this._refPolicy === 'listeners') this._applyRefPolicy();
  }

  _reportDecodeError(err) {
    // A frame that could not be decoded was skipped; the stream is intact.
    if (this.listenerCount('messageerror') > 0) this.emit('messageerror', err);
    else this._emitError(err);
  }

  _emitError(err) {
    // A hostile or broken peer must not be able to crash the process through
    // an unhandled 'error' event: without listeners, errors are warnings (and
    // fatal ones are also passed to 'close').
    if (this.listenerCount('error') > 0) this.emit('error', err);
    else process.emitWarning(err);
  }

  // The handle's stream ended: its reason (END_REASONS) becomes the close
  // reason; a system error is finished by name.
  _onEnd(reason, err, errnoName) {
    if (this._state === 'closed') return;
    switch (reason) {
      case END_REASONS.TRUNCATED: this._finish('truncated', err); break;
      case END_REASONS.RING_CORRUPT: this._finish('protocol-error', err); break;
      case END_REASONS.OUT_OF_MEMORY: this._finish('error', err); break;
      case END_REASONS.MESSAGE_TOO_LARGE:
      case END_REASONS.SEGMENT_PROTOCOL: this._finish('framing-error', err); break;
      case END_REASONS.SYSTEM_ERROR: this._finish('peer-closed', null, errnoName || 'EIO'); break;
      default: this._finish('peer-closed', null);
    }
  }

  // Closes the handle and settles everything that waits on the channel.
  // errnoName: a failed system call's errno name ('EPIPE'), if one ended it.
  _finish(reason, err, errnoName) {
    if (this._state === 'closed') return;
    // A channel still connecting belongs to a connect() whose promise
    // delivers its error: no 'error' event or process warning besides.
    const wasConnecting = this._state === 'connecting';
    if (errnoName !== undefined && this._state === 'connecting') {
      reason = 'error';
      err = systemError('ERR_PROCWIRE_CONNECT_FAILED', errnoName, 'connect');
    } else if (errnoName !== undefined) {
      const sys = systemError('ERR_PROCWIRE_SOCKET', errnoName, 'socket');
      // A reset or broken pipe is how a crashed peer looks: a close reason,
      // not an error of ours.
      if (sys.syscallCode === 'ECONNRESET' || sys.syscallCode === 'EPIPE') reason = 'peer-reset';
      else { reason = 'error'; err = err || sys; }
    }
    if (this._state === 'connecting' && reason !== 'local' && reason !== 'destroyed') {
      err = err || makeError('ERR_PROCWIRE_CONNECT_FAILED', 'connection failed');
    }
    this._finalStats = this.stats();
    this._state = 'closed';
    if (this._sendingListed) {
      this._sendingListed = false;
      sendingChannels.delete(this);
    }
    if (this._poolTimer !== null) {
      clearTimeout(this._poolTimer);
      this._poolTimer = null;
    }
    // A handle still waiting for its answer is let go, as Node closes it on
    // disconnect.
    if (this._handles !== null) this._handles._release();
    this._closeReason = reason;
    this._closeError = err;
    if (debug.enabled) debug('channel %s closed: %s%s', this.transport, reason, err ? ` (${err.code}: ${err.message})` : '');
    // What the handle wrote within send() (the first message of a tick, a
    // large frame, ring records) was sent, even though the flush that would
    // have reported it never comes: its callbacks succeed.
    const written = typeof this._handle.written === 'function' ? this._handle.written() : this._written;
    this._handle.close();
    const closedError = makeError('ERR_PROCWIRE_CHANNEL_CLOSED', `channel closed (${reason})`, err || undefined,
      { reason });
    const cbs = this._callbacks;
    this._callbacks = [];
    const requests = [...this._requests.keys()];
    process.nextTick(() => {
      for (const [end, cb] of cbs) cb(end <= written ? null : closedError);
      settleClosed(this, requests, (message = closedError.message) =>
        makeError('ERR_PROCWIRE_CHANNEL_CLOSED', message, err || undefined, { reason }),
      (id, e) => this._settleRequest(id, e));
      if (err && reason !== 'local' && !wasConnecting) this._emitError(err);
      this.emit('disconnect');
      this.emit('close', reason, err || undefined);
    });
  }
}

// Every option a Channel takes, checked (coded errors) and with defaults
// filled in; segmentPool stays undefined when unset (its default depends on
// the transport). fork() calls this before it spawns, so that a bad option
// throws with no child behind it.
function channelSettings(options) {
  options = validateObject(options, 'options');
  const outOfLine = options.outOfLine === undefined ? 'auto' : options.outOfLine;
  if (!OUT_OF_LINE_MODES.includes(outOfLine)) throw invalidArg('outOfLine must be "auto", "always" or "never"');
  const rings = options.rings === undefined ? 'auto' : options.rings;
  if (rings !== 'auto' && rings !== 'never') throw invalidArg('rings must be "auto" or "never"');
  if (options.segmentPool !== undefined && typeof options.segmentPool !== 'boolean') {
    throw invalidArg('segmentPool must be a boolean');
  }
  const maxConcurrentRequests = validateSize(options.maxConcurrentRequests, 'maxConcurrentRequests',
    DEFAULT_MAX_CONCURRENT_REQUESTS, 2 ** 31 - 1);
  if (maxConcurrentRequests < 1) throw invalidArg('maxConcurrentRequests must be at least 1');
  return {
    serialization: validateSerialization(options.serialization),
    maxMessageSize: validateMaxMessageSize(options.maxMessageSize),
    highWaterMark: validateSize(options.highWaterMark, 'highWaterMark', DEFAULT_HIGH_WATER_MARK),
    // A hard cap behind the soft one: a sender that ignores send() === false
    // while its peer has stopped reading would otherwise grow without bound.
    maxQueuedBytes: validateSize(options.maxQueuedBytes, 'maxQueuedBytes', DEFAULT_MAX_QUEUED_BYTES),
    requestTimeout: validateSize(options.requestTimeout, 'requestTimeout', DEFAULT_REQUEST_TIMEOUT, MAX_TIMEOUT),
    outOfLine,
    outOfLineThreshold: validateSize(options.outOfLineThreshold, 'outOfLineThreshold', DEFAULT_OUT_OF_LINE_THRESHOLD),
    rings,
    maxConcurrentRequests,
    maxSegmentsInFlight: validateSize(options.maxSegmentsInFlight, 'maxSegmentsInFlight', DEFAULT_MAX_SEGMENTS_IN_FLIGHT),
    segmentPool: options.segmentPool,
    segmentPoolMaxBytes: validateSize(options.segmentPoolMaxBytes, 'segmentPoolMaxBytes', DEFAULT_SEGMENT_POOL_BYTES),
    segmentPoolMaxCount: validateSize(options.segmentPoolMaxCount, 'segmentPoolMaxCount', DEFAULT_SEGMENT_POOL_COUNT, 65536),
    segmentPoolIdleTimeout: validateSize(options.segmentPoolIdleTimeout, 'segmentPoolIdleTimeout',
      DEFAULT_SEGMENT_POOL_IDLE, MAX_TIMEOUT),
  };
}

// A small frame decoded in JavaScript that failed: its error, in the
// frame's place in the batch (a private class, so no decoded value is one).
class DecodeFailure {
  constructor(error) {
    this.error = error;
  }
}

// The `count` frames a native handle left for JavaScript (decodeInJs):
// their payloads back to back in `bytes`, and [index, offset, length]
// triples in `frames`; each decoded value becomes messages[index], or a
// DecodeFailure. Decoded values never borrow `bytes` (the addon leaves
// frames holding views to its own decoder), so it is reused for the next
// batch.
function decodeSmallFrames(messages, bytes, frames, count) {
  const decodeRange = codec.advanced.decodeRange;
  for (let k = 0; k < 3 * count; k += 3) {
    try {
      messages[frames[k]] = decodeRange(bytes, frames[k + 1], frames[k + 2]);
    } catch (err) {
      messages[frames[k]] = new DecodeFailure(err);
    }
  }
}

// A backlogged message that came with a handle.
class WithHandle {
  constructor(message, handle) {
    this.message = message;
    this.handle = handle;
  }
}

// The second argument of send() is Node's sendHandle position; a plain
// options object ({ transfer }) there is procwire's send options.
function isSendOptions(value) {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

// Whether an ArrayBuffer may be Node's shared Buffer pool (Buffer.from,
// Buffer.allocUnsafe and friends slice small Buffers out of it): the current
// pool, or one of the pool's size that earlier small Buffers may still share.
function mayBePooled(ab) {
  return ab.byteLength === Buffer.poolSize || Buffer.allocUnsafe(1).buffer === ab;
}

// Buffers and views stand for their ArrayBuffer; each is listed once. Only
// memory the sender owns alone is handed over (detached): a view that does
// not cover its whole ArrayBuffer, or an ArrayBuffer that may be Node's
// Buffer pool, is shared with other Buffers, so it is left out of the list
// and its bytes are copied as for any other message; detaching it would
// empty unrelated Buffers and break every later Buffer.allocUnsafe.
// The ids of a SEGRET or SEGDROP message: a non-empty array of u32 > 0.
function validSegmentIds(ids) {
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_SEGMENT_IDS) return false;
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 1 || id > 0xffffffff) return false;
  }
  return true;
}

function transferList(list) {
  if (!Array.isArray(list)) throw invalidArg('options.transfer must be an array');
  const out = [];
  for (const item of list) {
    let ab;
    if (item instanceof ArrayBuffer) {
      ab = item;
    } else if (ArrayBuffer.isView(item) && item.buffer instanceof ArrayBuffer) {
      ab = item.buffer;
      if (item.byteOffset !== 0 || item.byteLength !== ab.byteLength) continue;
    } else {
      throw invalidArg('options.transfer holds only ArrayBuffers, Buffers and typed arrays');
    }
    if (mayBePooled(ab)) continue;
    if (!out.includes(ab)) out.push(ab);
  }
  return out;
}

function serializeError(err) {
  if (err instanceof Error) {
    return { name: err.name, message: err.message, code: err.code, stack: err.stack };
  }
  return { name: 'Error', message: String(err) };
}

module.exports = { Channel, channelSettings, DEFAULT_HIGH_WATER_MARK, DEFAULT_REQUEST_TIMEOUT, DEFAULT_OUT_OF_LINE_THRESHOLD, isInternal };
