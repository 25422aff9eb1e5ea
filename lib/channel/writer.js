'use strict';
// Writer: the write side of a Channel, and the only object that calls the
// handle's write methods. It owns the byte counters (`pushed`, every byte
// handed to the handle; `written`, every byte the kernel took), the send
// callbacks by byte offset, highWaterMark/'drain', maxQueuedBytes and the
// tick flush. The stage-before-write rule lives in #push alone: frames
// staged earlier in the tick are handed over before any other write, so
// nothing overtakes them.

const codec = require('../codec');
// The advanced fast path, loaded by the first advanced channel's writer.
let fastCodec = null;
const { makeError } = require('../errors');
const { invalidArg } = require('../validate');
const { CMD } = require('../protocol');
const { kWriteFailed } = require('../write-failure');
const { FrameStager } = require('./stager');
const { refuseSeparated } = require('../codec/separate');
const { kPhase, kReader, kFinish, kEmitError, kApplyRefPolicy } = require('./symbols');

// The handle's write methods, as #push names them.
const OP_WRITE = 0;
const OP_WRITE_TRANSFER = 1;
const OP_WRITE_FRAME = 2;
const OP_WRITE_BUFFER = 3;
const OP_WRITE_REQUEST = 4;
const OP_WRITE_RESPONSE = 5;
const OP_ENABLE_RINGS = 6;

function flushTick(writer) {
  writer.flush();
}

// Open channels that have sent: those whose sends of this tick wait for
// flushTick are written out at exit. Node's pipe writes as soon as send()
// is called, so a message sent just before process.exit() reaches the peer;
// procwire gathers a tick's sends into one write on the next tick, which
// exit() never reaches. One 'exit' listener for all channels (not one each:
// a parent may hold hundreds) writes them out then. A channel joins at its
// first send and leaves when it closes, not at every flush (adding and
// removing it once per tick cost more than the flush's own bookkeeping).
const sendingWriters = new Set();
let exitListening = false;

function flushAtExit() {
  for (const writer of sendingWriters) {
    if (writer.flushScheduled) writer.flush();
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

function failLater(host, err) {
  host[kFinish]('error', err);
}

function writable(host) {
  const phase = host[kPhase];
  return phase === 'open' || phase === 'connecting';
}

class Writer {
  // host: the Channel (its phase, settings and events); segments: its
  // SegmentFlow, whose bytes in flight count as queued. fastMaxView: the
  // largest view the JavaScript encoder writes inline (-1: that encoder is
  // not used; views from the segment threshold on are declined so the
  // addon may still send them in shared memory).
  constructor(host, handle, caps, segments, fastMaxView) {
    this.host = host;
    this.handle = handle;
    this.requests = caps.requests;
    this.closedWritten = caps.written;
    this.segments = segments;
    this.fastMaxView = fastMaxView;
    if (fastMaxView >= 0 && fastCodec === null) fastCodec = codec.fastPath();
    // Frames encoded by that encoder wait here until the next write or
    // flush; `pushed` counts them already.
    this.stager = new FrameStager(fastMaxView >= 0 && caps.stagedWrites);
    if (this.stager.buffer !== null) handle.stageFrames(this.stager.buffer);
    // The largest payload the handle takes, mirrored so a staged frame is
    // held to it as the addon holds every other (the hello lowers it).
    this.writeLimit = host.maxMessageSize;
    this.pushed = 0;
    this.written = 0;
    this.callbacks = [];        // [byteOffset, callback] in write order
    this.flushScheduled = false;
    this.sendingListed = false;  // in sendingWriters (see there)
    this.needDrain = false;
    // Set while bytes wait to be written: like a pending write on Node's
    // pipe, they keep the process alive whatever the ref policy says, so a
    // child that sends and then runs out of work does not exit before its
    // message is out.
    this.held = false;
  }

  // Bytes queued but not yet handed to the kernel, plus shared-memory bytes
  // the peer has not yet taken.
  get queued() {
    return this.pushed - this.written + this.segments.inFlightBytes();
  }

  overHighWaterMark() {
    return this.queued >= this.host.highWaterMark || this.segments.overLimit();
  }

  // One user message (send()), the channel already open -> send()'s result.
  send(message, transfer, callback) {
    const host = this.host;
    // Throws (coded) if the value cannot be encoded; nothing is queued then.
    if (transfer === undefined) this.pushed = this.write(message);
    else this.pushed = this.#encoding(OP_WRITE_TRANSFER, message, transfer);
    // A getter of the message destroyed the channel (its pending callbacks
    // are settled already).
    if (host[kPhase] === 'closed') return this.refuse(callback, true);
    if (callback) this.callbacks.push([this.pushed, callback]);
    this.scheduleFlush();
    const queued = this.queued;
    if (queued > host.maxQueuedBytes) {
      const err = makeError('ERR_PROCWIRE_QUEUE_LIMIT',
        `${queued} bytes queued or in flight, over maxQueuedBytes (${host.maxQueuedBytes})`);
      process.nextTick(failLater, host, err);
      return false;
    }
    if (this.overHighWaterMark()) {
      this.needDrain = true;
      return false;
    }
    return true;
  }

  // A send the channel can no longer take -> false: its callback gets the
  // close error on a later tick, or else (emit) 'error' does.
  refuse(callback, emit) {
    const err = makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'channel closed');
    if (callback) process.nextTick(callback, err);
    else if (emit) process.nextTick((host) => host[kEmitError](err), this.host);
    return false;
  }

  // Internal traffic (control messages, handle answers): never the user's,
  // so an error goes to 'error', and nothing is sent once closing.
  sendControl(message) {
    if (!writable(this.host)) return;
    try {
      this.pushed = this.write(message);
      this.scheduleFlush();
    } catch (err) {
      this.host[kEmitError](err);
    }
  }

  // Handle passing: writes `message` (a NODE_HANDLE wrapper) as one frame
  // with a copy of `fd` riding on its first byte, as Node's IPC does.
  sendWithDescriptor(message, fd, callback) {
    const host = this.host;
    if (!writable(host)) return this.refuse(callback, false);
    const bytes = codec[host.serialization].encode(message);
    if (host[kPhase] === 'closed') return this.refuse(callback, false);  // as in send()
    this.#push(OP_WRITE_BUFFER, bytes, [fd]);
    if (callback) this.callbacks.push([this.pushed, callback]);
    this.scheduleFlush();
    return !this.overHighWaterMark();
  }

  // Writes pre-built frames as they are, optionally with descriptors (tests
  // of hostile input).
  sendRaw(bytes, fds) {
    // The native handle CHECKs that it is open and got bytes; a closed channel
    // or a bad argument is refused here with a coded error instead.
    if (!writable(this.host)) throw makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'channel closed');
    if (!ArrayBuffer.isView(bytes)) throw invalidArg('bytes must be a Buffer or an ArrayBufferView');
    if (fds !== undefined && (!Array.isArray(fds) || !fds.every((fd) => Number.isInteger(fd) && fd >= 0 && fd <= 0x7fffffff))) {
      throw invalidArg('fds must be an array of descriptors');
    }
    this.#push(OP_WRITE_BUFFER, bytes, fds);
    this.scheduleFlush();
  }

  // A request through a backend with native request/reply (capability
  // `requests`): the same queueing and backpressure as send().
  sendRequest(id, body) {
    if (!writable(this.host)) throw makeError('ERR_PROCWIRE_CHANNEL_CLOSED', 'channel closed');
    this.#encoding(OP_WRITE_REQUEST, id, body);
    this.scheduleFlush();
  }

  // A reply: ok with its body, or not with a serialized error. rethrow: an
  // encoding failure of the body is the caller's to handle (it answers with
  // the error instead); otherwise it goes to 'error'.
  sendResponse(id, ok, bodyOrError, rethrow) {
    if (!writable(this.host)) return;
    try {
      if (this.requests) this.#encoding(OP_WRITE_RESPONSE, id, ok, bodyOrError);
      else if (ok) this.#encoding(OP_WRITE, { cmd: CMD.RESPONSE, id, ok, body: bodyOrError });
      else this.#encoding(OP_WRITE, { cmd: CMD.RESPONSE, id, ok, error: bodyOrError });
      this.scheduleFlush();
    } catch (err) {
      if (rethrow) throw err;
      this.host[kEmitError](err);
    }
  }

  // Queues the ring set-up frame (the byte count includes it).
  sendRingSetup() {
    this.#push(OP_ENABLE_RINGS);
    this.scheduleFlush();
  }

  // One message to the handle's queue -> total bytes ever queued. Throws
  // (coded) if the value cannot be encoded; nothing is queued then.
  //
  // The first message since the last flush goes to the handle at once, so
  // it leaves within send() (see docs/channel.md); the ones after it in the
  // same tick are staged, and each batch crosses into the addon once.
  write(message) {
    this.stager.encoding++;
    try {
      return this.#encode(message);
    } catch (err) {
      throw tooDeep(err);
    } finally {
      this.stager.encoding--;
    }
  }

  #encode(message) {
    // The handle encodes every message itself: a JSON channel's, the
    // fallback's, a TLS one.
    if (this.fastMaxView < 0) return this.#push(OP_WRITE, message);
    const stager = this.stager;
    if (stager.buffer !== null && this.flushScheduled && stager.encoding === 1) {
      const length = stager.tryAppend(message, this.fastMaxView, this.writeLimit);
      if (length > 0) return stager.full ? this.drainStage() : this.pushed + length;
      // Everything else goes after what is staged.
      if (stager.spilled >= 0) return this.#push(OP_WRITE_FRAME, fastCodec.scratch(), stager.spilled);
      return this.#encodeInAddon(message);
    }
    // A write from a getter of a message being encoded goes after what was
    // staged before that message, and before the message itself (#push).
    const length = fastCodec.encodeToScratch(message, this.fastMaxView);
    if (length >= 0) return this.#push(OP_WRITE_FRAME, fastCodec.scratch(), length);
    return this.#encodeInAddon(message);
  }

  // A message the JavaScript encoder declined: the addon encodes it with
  // V8's serializer, unless it is marked (../codec/separate.js), which that
  // serializer cannot write as separate values; nothing is queued then.
  #encodeInAddon(message) {
    refuseSeparated(message);
    return this.#push(OP_WRITE, message);
  }

  // One of the handle's writes that encode the message in the addon,
  // counted in the stager's `encoding` while it runs, as write() is.
  #encoding(op, a, b, c) {
    this.stager.encoding++;
    try {
      return this.#push(op, a, b, c);
    } catch (err) {
      throw tooDeep(err);
    } finally {
      this.stager.encoding--;
    }
  }

  // The one place that writes into the handle: the staged frames first,
  // then this write -> total bytes ever queued.
  #push(op, a, b, c) {
    if (this.stager.frames !== 0) this.drainStage();
    const handle = this.handle;
    switch (op) {
      case OP_WRITE: this.pushed = handle.write(a); break;
      case OP_WRITE_TRANSFER: this.pushed = handle.write(a, b); break;
      case OP_WRITE_FRAME: this.pushed = handle.writeFrame(a, b); break;
      case OP_WRITE_BUFFER: this.pushed = b === undefined ? handle.writeBuffer(a) : handle.writeBuffer(a, b); break;
      case OP_WRITE_REQUEST: this.pushed = handle.writeRequest(a, b); break;
      case OP_WRITE_RESPONSE: this.pushed = handle.writeResponse(a, b, c); break;
      default: this.pushed = handle.enableRings();
    }
    return this.pushed;
  }

  // Hands the staged frames to the addon -> total bytes ever queued. Only
  // running out of memory for their copy fails it; frames before it may
  // already be in the ring, so the rest cannot be sent in order, and the
  // channel closes with that error (outside send()).
  drainStage() {
    // A closed handle takes nothing: staged frames are dropped with it.
    if (this.stager.frames === 0 || this.host[kPhase] === 'closed') return this.pushed;
    const bytes = this.stager.take();
    try {
      this.pushed = this.handle.writeStaged(bytes);
    } catch (err) {
      process.nextTick(failLater, this.host, err);
    }
    return this.pushed;
  }

  scheduleFlush() {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    if (!this.sendingListed) {
      this.sendingListed = true;
      sendingWriters.add(this);
      if (!exitListening) {
        exitListening = true;
        process.once('exit', flushAtExit);
      }
    }
    // Everything sent in this tick goes out in one gathered write.
    process.nextTick(flushTick, this);
  }

  flush() {
    this.flushScheduled = false;
    const host = this.host;
    if (host[kPhase] === 'closed') return;
    this.drainStage();
    if (host[kPhase] === 'closed') return;
    const written = this.handle.flush();
    if (typeof written === 'string') {
      // The fork surface reports this as Node's send() does (EPIPE).
      if (host[kWriteFailed] !== undefined) {
        host[kWriteFailed](written, this.closedWritten ? this.handle.written() : this.written);
      }
      if (this.#peerGoneWhileReading(written)) return;
      host[kFinish]('peer-closed', null, written);
      return;
    }
    this.onWritten(written);
  }

  // A write that finds the peer gone (it wrote, then closed) must not drop
  // what the peer sent before: that is still in our socket's buffer, and
  // Node's channel reads it, end of file last, before it disconnects. So a
  // channel that is reading leaves the close to the read side, which sees
  // the end after those messages. One that is not reading would never see
  // it, and closes at once.
  #peerGoneWhileReading(errnoName) {
    if (errnoName !== 'EPIPE' && errnoName !== 'ECONNRESET') return false;
    const host = this.host;
    if (host[kPhase] !== 'open' || (host.transport !== 'fork' && host.transport !== 'unix')) return false;
    return host[kReader].reading;
  }

  // Writes out now what this tick's sends left for its flush; their
  // callbacks are still settled by that flush, never in here. For kill():
  // Node's pipe writes within send(), so everything sent before a signal is
  // in the socket when the signal goes, and its callback succeeds.
  writeOutNow() {
    if (!this.flushScheduled || this.host[kPhase] === 'closed') return;
    this.drainStage();
    if (this.host[kPhase] !== 'closed') this.handle.flush();
  }

  onWritten(written) {
    const host = this.host;
    this.written = written;
    // The addon may queue a frame of its own (the server's ring set-up,
    // answering the client's), which the byte count written includes.
    if (written > this.pushed) this.pushed = written;
    const cbs = this.callbacks;
    let n = 0;
    while (n < cbs.length && cbs[n][0] <= written) n++;
    if (n > 0) {
      const done = cbs.splice(0, n);
      for (const [, cb] of done) cb(null);
    }
    this.maybeDrain();
    const waiting = this.pushed > this.written;
    if (waiting !== this.held) {
      this.held = waiting;
      host[kApplyRefPolicy]();
    }
    if (host[kPhase] === 'closing' && this.pushed === this.written) host[kFinish]('local', null);
  }

  maybeDrain() {
    if (this.needDrain && !this.overHighWaterMark()) {
      this.needDrain = false;
      this.host.emit('drain');
    }
  }

  // At close (the handle still open): leaves the exit list and takes the
  // pending callbacks -> [callbacks, bytes written]. What the handle wrote
  // within send() (the first message of a tick, a large frame, ring
  // records) was sent, even though the flush that would have reported it
  // never comes: its callbacks succeed.
  detach() {
    if (this.sendingListed) {
      this.sendingListed = false;
      sendingWriters.delete(this);
    }
    const cbs = this.callbacks;
    this.callbacks = [];
    return [cbs, this.closedWritten ? this.handle.written() : this.written];
  }
}

module.exports = { Writer };
