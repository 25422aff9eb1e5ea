'use strict';
// FrameStager: the messages of a tick after its first are encoded back to
// back, by the advanced format's JavaScript encoder, into one staging buffer
// that the Writer hands to the addon in one call per batch (writeStaged).
// It never touches the handle itself: the Writer drains it before every
// other write (lib/channel/writer.js, #push), so frames keep their order.

const codec = require('../codec');
// The advanced fast path, loaded by the first stager enabled (an advanced
// channel's).
let fastCodec = null;
const { makeError } = require('../errors');

// The staging buffer's size. A batch goes at the latest after
// STAGE_MAX_FRAMES messages, so a peer reading the ring starts on it while
// this side encodes the rest, or when less than STAGE_MIN_ROOM bytes are left.
const STAGE_BYTES = 64 * 1024;
const STAGE_MAX_FRAMES = 16;
const STAGE_MIN_ROOM = 4096;

class FrameStager {
  // enabled: the handle takes staged frames (capability stagedWrites) and
  // the channel encodes frames in JavaScript.
  constructor(enabled) {
    // The channel's for its whole life; the handle keeps a reference.
    this.buffer = enabled ? Buffer.allocUnsafeSlow(STAGE_BYTES) : null;
    if (enabled && fastCodec === null) fastCodec = codec.fastPath();
    this.bytes = 0;
    this.frames = 0;
    // How many writes into the handle are encoding a message right now. A
    // getter of that message may send() too; Node's serializer runs the
    // getter before its own write, so the getter's message goes first, and
    // a write while this is above 0 is never staged behind it.
    this.encoding = 0;
    // After tryAppend() declined: the length of the frame the encoder left
    // in its scratch buffer instead, or -1 if it declined the message.
    this.spilled = -1;
  }

  // Encodes `message` behind the staged frames -> its frame length once
  // staged, or 0 when it was not (see `spilled`). Throws (coded) a message
  // over `limit`, with nothing staged.
  tryAppend(message, maxView, limit) {
    const at = this.bytes;
    const length = fastCodec.encodeAppend(this.buffer, at, message, maxView);
    if (length < 0 || fastCodec.spilled()) {
      this.spilled = length;
      return 0;
    }
    if (length - 4 > limit) {
      throw makeError('ERR_PROCWIRE_MESSAGE_TOO_LARGE',
        `message of ${length - 4} bytes exceeds maxMessageSize (${limit} bytes); nothing was sent`);
    }
    // A getter that sent, or asked for stats(), handed the frames staged
    // before this one over meanwhile: this one moves up to what is
    // staged now (nothing; a nested write is never staged).
    if (this.bytes !== at) this.buffer.copyWithin(this.bytes, at, at + length);
    this.bytes += length;
    this.frames++;
    return length;
  }

  // Whether the batch should go now rather than wait for the flush.
  get full() {
    return this.frames >= STAGE_MAX_FRAMES || STAGE_BYTES - this.bytes < STAGE_MIN_ROOM;
  }

  // Empties the stage -> the byte length of the frames it held.
  take() {
    const bytes = this.bytes;
    this.bytes = 0;
    this.frames = 0;
    return bytes;
  }
}

module.exports = { FrameStager, STAGE_BYTES };
