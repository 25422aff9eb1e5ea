'use strict';
// StreamHandle: NativeChannel's interface (lib/transport/contract.js) over
// any Duplex byte stream: a net.Socket, a
// tls.TLSSocket, or anything that emits 'data' Buffers and accepts write().
// lib/channel/ drives it exactly as it drives the addon's NativeChannel:
//
//   new Channel(null, { createHandle: (callbacks, { serialization, maxMessageSize }) =>
//     new StreamHandle(socket, callbacks, { serialization, maxMessageSize }) })
//
// The frame codec and the framer are parameters (options.encode,
// options.createFramer): the TLS backend passes the loaded binding's, the
// fallback its own, so the same bytes go on the wire.
//
// Writes made in one tick are gathered by the Channel into one flush(), which
// becomes one stream.write(); flush() returns the bytes the stream has
// confirmed so far, and onwrite(total) follows each write's callback, which
// is how backpressure reaches Channel.send().

const { makeError } = require('../errors');

const { FORMATS, formatById, framingBytes } = require('../codec/formats');
const { DEFAULT_MAX_MESSAGE_SIZE } = require('../protocol');
const { HISTOGRAM_BUCKETS, countedStats, sizeBucket } = require('../stats');
const { END_REASONS } = require('./end-reasons');

// What a stream handle can do beyond the required methods
// (lib/transport/contract.js): a lowered read limit, and its descriptor.
const STREAM_CAPABILITIES = Object.freeze({ readLimit: true, fd: true });

// The errno name of a stream error: Node's system errors carry it in code.
function errnoNameOf(err) {
  return err && typeof err.code === 'string' && /^E[A-Z0-9]+$/.test(err.code) ? err.code : 'EIO';
}

// The end reason that goes with a coded error from the framer.
function reasonOf(err) {
  if (err.code === 'ERR_PROCWIRE_FRAME_TRUNCATED') return END_REASONS.TRUNCATED;
  if (err.code === 'ERR_PROCWIRE_OUT_OF_MEMORY') return END_REASONS.OUT_OF_MEMORY;
  return END_REASONS.MESSAGE_TOO_LARGE;
}

class StreamHandle {
  // stream: the Duplex, or null when it arrives later through attach() (a
  // connection still being accepted); writes queue until then.
  // callbacks: { onread, onwrite, onend, onconnect } (lib/channel/channel.js).
  // options:
  //   serialization  'advanced' | 'json' (or format: 0 | 1)
  //   maxMessageSize largest payload accepted
  //   connecting     true while the stream is still connecting: writes wait,
  //                  and onconnect() runs on its connectEvent
  //   connectEvent   default 'connect' ('secureConnect' for TLS)
  //   encode(format, value) -> Buffer frame (required)
  //   createFramer(format, max) -> { push(view[, sizes]), buffering() }
  //                  (required)
  //   fd             what fd() reports (default the stream's descriptor)
  constructor(stream, callbacks, options = {}) {
    this._cb = callbacks;
    this.capabilities = STREAM_CAPABILITIES;
    this._format = options.format !== undefined ? options.format
      : (FORMATS[options.serialization === undefined ? 'advanced' : options.serialization] || {}).id;
    if (formatById(this._format).id !== this._format) throw new TypeError('unknown serialization');
    this._framingBytes = framingBytes(formatById(this._format));
    this._max = options.maxMessageSize === undefined ? DEFAULT_MAX_MESSAGE_SIZE : options.maxMessageSize;
    // The codec and framer are always given (no default from lib/native.js:
    // the fallback binding builds on this file, and a default would make an
    // import cycle).
    if (typeof options.encode !== 'function' || typeof options.createFramer !== 'function') {
      throw new TypeError('StreamHandle needs options.encode and options.createFramer');
    }
    this._encode = options.encode;
    this._framer = options.createFramer(this._format, this._max);
    this._configuredMax = this._max;
    this._connecting = Boolean(options.connecting);
    this._connectEvent = options.connectEvent || 'connect';
    this._fd = options.fd;
    this._stream = null;
    this._queue = [];
    this._queuedLength = 0;
    this._pushed = 0;
    this._written = 0;
    this._reading = true;
    this._refed = true;
    this._ended = false;
    this._closed = false;
    this._sizes = [];
    this._counters = {
      messagesIn: 0, messagesOut: 0, bytesIn: 0, writeCalls: 0, readCalls: 0, decodeErrors: 0,
    };
    this._histogramIn = new Array(HISTOGRAM_BUCKETS).fill(0);
    this._histogramOut = new Array(HISTOGRAM_BUCKETS).fill(0);
    this._listeners = null;
    if (stream !== null && stream !== undefined) this.attach(stream);
  }

  // Gives the handle its stream (once).
  attach(stream) {
    if (this._stream !== null) throw new Error('StreamHandle already has a stream');
    this._stream = stream;
    if (this._closed) {
      stream.destroy();
      return;
    }
    const listeners = {
      data: (chunk) => this._onData(chunk),
      end: () => this._end(),
      error: (err) => this._end(undefined, errnoNameOf(err)),
      close: () => this._end(),
      connect: () => this._onConnect(),
    };
    this._listeners = listeners;
    stream.on('data', listeners.data);
    stream.on('end', listeners.end);
    stream.on('error', listeners.error);
    stream.on('close', listeners.close);
    if (this._connecting) stream.once(this._connectEvent, listeners.connect);
    if (!this._refed && typeof stream.unref === 'function') stream.unref();
    // A socket accepted with pauseOnConnect is not flowing yet.
    if (this._reading) stream.resume(); else stream.pause();
    if (!this._connecting) this.flush();
  }

  _onConnect() {
    if (!this._connecting || this._closed) return;
    this._connecting = false;
    this._cb.onconnect();
    if (this._closed) return;
    this.flush();
  }

  _onData(chunk) {
    if (this._closed || this._ended) return;
    if (typeof chunk === 'string') chunk = Buffer.from(chunk);
    const c = this._counters;
    c.readCalls++;
    c.bytesIn += chunk.length;
    this._sizes.length = 0;
    if (!this._deliver(this._framer.push(chunk, this._sizes), chunk.length)) return;
    // The framer stopped at a frame over the hello's provisional limit; the
    // hello completed in the batch just delivered (raising the limit), or
    // the held frame now fails the stream.
    const framer = this._framer;
    while (typeof framer.held === 'function' && framer.held()) {
      const bytes = framer.buffering();
      this._sizes.length = 0;
      if (!this._deliver(framer.pushHeld(this._sizes), bytes)) return;
    }
  }

  // Hands one framing result to the channel; false once the stream is over.
  _deliver([messages, errors, fatal], chunkLength) {
    const c = this._counters;
    const sizes = this._sizes;
    const failed = errors === undefined ? 0 : errors.length / 2;
    const frames = messages.length + failed;
    c.messagesIn += frames;
    c.decodeErrors += failed;
    if (sizes.length === frames) {
      for (let i = 0; i < frames; i++) this._histogramIn[sizeBucket(sizes[i])]++;
    } else if (frames > 0) {
      // A framer that does not report sizes: each frame counted at the mean.
      this._histogramIn[sizeBucket(Math.floor(chunkLength / frames))] += frames;
    }
    if (frames > 0) {
      let frameBytes = 0;
      for (let i = 0; i < sizes.length; i++) frameBytes += sizes[i];
      if (sizes.length !== frames) frameBytes = chunkLength;
      this._cb.onread(messages, errors, 0, 0, frameBytes);
      if (this._closed) return false;
    }
    if (fatal !== undefined) {
      this._end(fatal);
      return false;
    }
    return !this._ended;
  }

  // The stream ended, failed (errnoName) or was found corrupt (err): once.
  _end(err, errnoName) {
    if (this._ended || this._closed) return;
    this._keepAlive(false);
    if (err === undefined && errnoName === undefined && this._framer.buffering() > 0) {
      // The peer closed in the middle of a frame: say a message was lost.
      err = makeError('ERR_PROCWIRE_FRAME_TRUNCATED',
        `the peer closed the stream in the middle of a frame: ${this._framer.buffering()} bytes of a partial message were lost`);
    }
    this._ended = true;
    if (this._stream !== null) this._stream.pause();
    if (err !== undefined) this._cb.onend(reasonOf(err), err);
    else if (errnoName !== undefined) this._cb.onend(END_REASONS.SYSTEM_ERROR, undefined, errnoName);
    else this._cb.onend(END_REASONS.END_OF_STREAM);
  }

  // The largest payload accepted from now on (see NativeChannel's). false:
  // a frame already buffered is over it.
  // A limit below the stream's own is provisional (the hello's): the framer
  // holds a frame over it instead of failing, and _onData judges it again.
  setMaxMessageSize(max) {
    this._max = max;
    if (typeof this._framer.setMaxMessageSize !== 'function') return true;
    return this._framer.setMaxMessageSize(max, max < this._configuredMax) !== false;
  }

  // write(value) -> total bytes ever queued. A message over maxMessageSize
  // is refused before anything is queued, as by the addon.
  write(value) {
    const frame = this._encode(this._format, value);
    const payload = frame.length - this._framingBytes;
    if (payload > this._max) {
      throw makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
        `message of ${payload} bytes exceeds maxMessageSize (${this._max} bytes); nothing was sent`);
    }
    this._counters.messagesOut++;
    this._histogramOut[sizeBucket(frame.length)]++;
    this._enqueue(frame);
    return this._pushed;
  }

  // writeBuffer(view): bytes that already are a whole frame (copied).
  writeBuffer(view) {
    const bytes = Buffer.from(new Uint8Array(view.buffer, view.byteOffset, view.byteLength));
    this._enqueue(bytes);
    return this._pushed;
  }

  _enqueue(frame) {
    this._queue.push(frame);
    this._queuedLength += frame.length;
    this._pushed += frame.length;
  }

  // flush() -> total bytes written so far (the stream confirms the rest
  // through onwrite).
  flush() {
    const stream = this._stream;
    if (this._queue.length === 0 || this._connecting || this._closed || this._ended || stream === null ||
        stream.destroyed || stream.writableEnded) {
      return this._written;
    }
    const queue = this._queue;
    const length = this._queuedLength;
    this._queue = [];
    this._queuedLength = 0;
    const data = queue.length === 1 ? queue[0] : Buffer.concat(queue, length);
    this._counters.writeCalls++;
    stream.write(data, (err) => {
      if (err || this._closed) return;
      this._written += length;
      this._cb.onwrite(this._written);
    });
    return this._written;
  }

  readStart() {
    if (this._ended) return;
    this._reading = true;
    this._keepAlive(false);
    if (this._stream !== null && !this._closed) this._stream.resume();
  }

  readStop() {
    this._reading = false;
    if (this._stream !== null && !this._closed) this._stream.pause();
    this._keepAlive(this._refed && !this._ended && !this._closed);
  }

  // A paused stream stops reading, and a socket that does not read no longer
  // keeps the process alive; a paused channel must, as a reading one does
  // (the native channel keeps watching for hang-up instead). An idle timer
  // holds the loop while paused and referenced.
  _keepAlive(on) {
    if (on && this._pausedTimer === undefined) {
      this._pausedTimer = setInterval(() => {}, 2 ** 31 - 1);
    } else if (!on && this._pausedTimer !== undefined) {
      clearInterval(this._pausedTimer);
      this._pausedTimer = undefined;
    }
  }

  ref() {
    this._refed = true;
    if (this._stream !== null && typeof this._stream.ref === 'function') this._stream.ref();
    if (!this._reading) this._keepAlive(!this._ended && !this._closed);
  }

  unref() {
    this._refed = false;
    if (this._stream !== null && typeof this._stream.unref === 'function') this._stream.unref();
    this._keepAlive(false);
  }

  // Closes now: what is still queued is dropped.
  close() {
    if (this._closed) return;
    this._closed = true;
    this._keepAlive(false);
    this._queue = [];
    this._queuedLength = 0;
    const stream = this._stream;
    if (stream === null) return;
    // Errors that come after close are nobody's business; keep a listener so
    // they are not uncaught.
    const listeners = this._listeners;
    if (listeners !== null) {
      stream.off('data', listeners.data);
      stream.off('end', listeners.end);
      stream.off('close', listeners.close);
      stream.off(this._connectEvent, listeners.connect);
    }
    stream.destroy();
  }

  // The stats array of lib/stats.js (nothing goes out of line here).
  stats() {
    return countedStats(this._counters, {
      bytesOut: this._written,
      queuedBytes: this._pushed - this._written,
      bufferedBytes: this._framer.buffering(),
      histogramIn: this._histogramIn,
      histogramOut: this._histogramOut,
    });
  }

  fd() {
    if (this._fd !== undefined) return this._fd;
    const handle = this._stream && this._stream._handle;
    return handle && typeof handle.fd === 'number' ? handle.fd : -1;
  }
}

module.exports = { StreamHandle };
