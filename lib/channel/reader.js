'use strict';
// Reader: the read side of a Channel. A batch from the handle (onread) is
// decoded where the addon left small frames to JavaScript, its decode
// errors are reported in their place, descriptors are paired with their
// messages, and each message goes to the hello's gate, the control table
// (control.js) or the inbox (inbox.js). It also owns the read holds: the
// user, the backlog and the queue of waiting requests each stop reading on
// their own, and reading restarts only when none holds it.

const codec = require('../codec');
const { binding } = require('../native');
const { isInternal } = require('../protocol');
const { CMD } = require('../protocol');
const { kPhase, kWriter, kInbox, kControl, kRings, kEmitError } = require('./symbols');

// The buffers a native advanced channel's small frames are copied into for
// JavaScript to decode (decodeSmallFrames): a batch's frames past either
// bound are decoded by the addon instead.
const SMALL_FRAME_BYTES = 64 * 1024;
const SMALL_FRAME_COUNT = 1024;

// The read holds.
const HOLD_USER = 1;
const HOLD_BACKLOG = 2;
const HOLD_REQUESTS = 4;

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

class Reader {
  // jsDecode: the handle leaves small advanced frames to JavaScript.
  constructor(host, handle, jsDecode) {
    this.host = host;
    this.handle = handle;
    // While set (during the hello), every message goes here and nowhere
    // else: see lib/security/handshake.js.
    this.gate = null;
    // Small frames the addon left to JavaScript that failed to decode.
    this.decodeErrorsInJs = 0;
    this.holds = 0;
    // Small advanced frames are decoded here by the same fast path, in one
    // batch per read, rather than by a ValueDeserializer set up per message
    // in the addon. The addon copies them into these two buffers, this
    // channel's for its whole life.
    this.smallBytes = null;
    this.smallFrames = null;
    if (jsDecode) {
      this.smallBytes = Buffer.allocUnsafeSlow(SMALL_FRAME_BYTES);
      this.smallFrames = new Uint32Array(3 * SMALL_FRAME_COUNT);
      handle.decodeInJs(this.smallBytes, this.smallFrames);
    }
  }

  // Whether nothing holds reading.
  get reading() {
    return this.holds === 0;
  }

  hold(reason) {
    this.holds |= reason;
    if (this.host[kPhase] !== 'closed') this.handle.readStop();
  }

  release(reason) {
    this.holds &= ~reason;
    if (this.host[kPhase] !== 'closed' && this.holds === 0) this.handle.readStart();
  }

  isHeld(reason) {
    return (this.holds & reason) !== 0;
  }

  // frameBytes: the batch's frame bytes (inline and segments), for the
  // backlog's byte bound. fds: [messageIndex, fd, ...], the descriptors that
  // came with NODE_HANDLE messages of this batch (the addon only passes them
  // on channels that called acceptHandles()).
  onBatch(messages, errors, segments, segmentBytes, frameBytes, fds, smallFrames) {
    if (smallFrames > 0) decodeSmallFrames(messages, this.smallBytes, this.smallFrames, smallFrames);
    const host = this.host;
    // Tell the sender its shared memory arrived, so it may send more.
    if (segments > 0) host[kWriter].sendControl({ cmd: CMD.SEGMENT_ACK, n: segments, bytes: segmentBytes });
    // Each message's share of the batch's bytes, for the backlog's byte
    // bound (handles that do not report bytes count none).
    const share = messages.length > 0 && typeof frameBytes === 'number' ? frameBytes / messages.length : 0;
    let e = 0;
    let f = 0;
    for (let i = 0; i < messages.length; i++) {
      // Once closed, the rest of the batch is dropped, but its descriptors
      // are still closed below.
      while (host[kPhase] !== 'closed' && errors !== undefined && e < errors.length && errors[e] === i) {
        this.#decodeError(errors[e + 1]);
        e += 2;
      }
      let fd;
      if (fds !== undefined && f < fds.length && fds[f] === i) {
        fd = fds[f + 1];
        f += 2;
      }
      const message = messages[i];
      if (message instanceof DecodeFailure) {
        // A small frame decoded in JavaScript that failed, reported in its
        // place as the addon reports its own (no descriptor rides on one).
        this.decodeErrorsInJs++;
        if (host[kPhase] === 'closed') continue;
        this.#decodeError(message.error);
      } else if (host[kPhase] === 'closed' || this.gate !== null) {
        // No handle is taken before the hello completes, nor after close.
        if (fd !== undefined) binding.closeFd(fd);
        if (host[kPhase] === 'closed') continue;
        this.gate(message);
      } else if (isInternal(message)) {
        host[kControl].onMessage(message, fd);
      } else {
        host[kInbox].deliver(message, share);
      }
    }
    if (host[kPhase] === 'closed') return;
    const rings = host[kRings];
    if (rings.pending) rings.maybeStart();
    while (errors !== undefined && e < errors.length) {
      this.#decodeError(errors[e + 1]);
      e += 2;
      if (host[kPhase] === 'closed') return;
    }
  }

  // Before the hello completes a frame that fails to decode is the gate's
  // to judge (it fails the hello), not a user-visible event.
  #decodeError(err) {
    if (this.gate !== null) {
      this.gate(null);
      return;
    }
    // A frame that could not be decoded was skipped; the stream is intact.
    const host = this.host;
    if (host.listenerCount('messageerror') > 0) host.emit('messageerror', err);
    else host[kEmitError](err);
  }
}

module.exports = { Reader, HOLD_USER, HOLD_BACKLOG, HOLD_REQUESTS };
