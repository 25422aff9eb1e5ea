'use strict';
// SegmentFlow: the shared-memory segments a Channel sends and takes. It
// holds the counters the addon writes (segment bytes and segments sent),
// the peer's acknowledgements against them (backpressure), and the segment
// pool's loan/return cycle: the peer returns recycled segments (SEGRET),
// this end tells it which ones it dropped (SEGDROP), and an idle pool is
// trimmed after segmentPoolIdleTimeout.

const { CMD, CAPABILITIES_VERSION, RINGS_VERSION } = require('../protocol');
const { kPhase, kWriter } = require('./symbols');

// The receiver maps at most this many times its own segmentPoolMaxBytes of
// a peer's recycled segments (set both ends' bounds alike).
const MAX_MAPPED_FACTOR = 4;
// A SEGRET or SEGDROP message names at most this many ids.
const MAX_SEGMENT_IDS = 4096;

// The ids of a SEGRET or SEGDROP message: a non-empty array of u32 > 0.
function validSegmentIds(ids) {
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_SEGMENT_IDS) return false;
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 1 || id > 0xffffffff) return false;
  }
  return true;
}

function trimIdlePool(flow) {
  flow.trim();
}

class SegmentFlow {
  // counters: [segment bytes sent, segments sent], written by the addon
  // (null when this channel never sends segments). caps: the handle's.
  constructor(host, handle, caps, counters) {
    this.host = host;
    this.handle = handle;
    this.counters = counters;
    this.bytesAcked = 0;
    this.acked = 0;
    // Say what we can receive. Only native channels that may use segments
    // do; a plain Node peer never gets procwire's internal messages this way.
    this.canTake = counters !== null && caps.segments;
    // This end takes recycled segments (and future-write-sealed transfers)
    // when it trusts the peer not to change bytes after sending them.
    this.poolCapable = caps.segmentPool;
    this.acceptsPool = this.canTake && host.segmentPool && caps.segmentPool;
    this.peerTakes = false;
    this.poolSending = false;
    this.poolTimer = null;
    // A receiver maps at most this much of the peer's recycled segments at
    // once (the peer's pool, plus segments it dropped that we have not yet
    // heard about); past it a new segment is refused.
    if (this.acceptsPool) handle.acceptSegmentPool(MAX_MAPPED_FACTOR * host.segmentPoolMaxBytes);
  }

  inFlightBytes() {
    return this.counters === null ? 0 : this.counters[0] - this.bytesAcked;
  }

  // Past maxSegmentsInFlight unacknowledged segments send() returns false.
  overLimit() {
    return this.counters !== null && this.counters[1] - this.acked >= this.host.maxSegmentsInFlight;
  }

  // The peer's capabilities: it takes segments (and maybe recycled ones).
  onCapabilities(message) {
    if (message.segments !== true || !this.canTake || this.peerTakes) return;
    this.peerTakes = true;
    this.handle.enableOutOfLine();
    if (message.pool === true && this.host.segmentPool && this.poolCapable) {
      this.poolSending = true;
      this.handle.enableSegmentPool(this.host.segmentPoolMaxBytes, this.host.segmentPoolMaxCount);
    }
  }

  // The peer took segments: numbers from the peer are checked before they
  // touch our accounting (NaN, Infinity, negatives or acks for more than was
  // sent would break backpressure for good) -> false when they are wrong.
  onAck(message) {
    const n = message.n;
    const bytes = message.bytes;
    const sent = this.counters;
    if (!Number.isSafeInteger(n) || n < 0 || !Number.isSafeInteger(bytes) || bytes < 0 || sent === null ||
        this.acked + n > sent[1] || this.bytesAcked + bytes > sent[0]) {
      return false;
    }
    this.acked += n;
    this.bytesAcked += bytes;
    this.host[kWriter].maybeDrain();
    return true;
  }

  // The addon says these recycled segments are no longer read here.
  returnSegments(ids) {
    this.#sendIds(CMD.SEGMENT_RETURN, ids);
  }

  // The peer handed recycled segments back -> false when an id was not
  // sent, or is already back: the peer is confused or hostile, and the
  // pool's bookkeeping cannot be trusted any more.
  onReturned(ids) {
    if (!this.poolSending || !validSegmentIds(ids) || this.handle.recycleSegments(ids) !== true) return false;
    this.#sendIds(CMD.SEGMENT_DROP, this.handle.takeDroppedSegments() || []);
    // Idle from now on until the next return: trim when the timer fires.
    if (this.poolTimer !== null) clearTimeout(this.poolTimer);
    this.poolTimer = setTimeout(trimIdlePool, this.host.segmentPoolIdleTimeout, this);
    this.poolTimer.unref();
    return true;
  }

  trim() {
    this.poolTimer = null;
    if (this.host[kPhase] === 'open') this.#sendIds(CMD.SEGMENT_DROP, this.handle.trimSegments() || []);
  }

  // The peer dropped recycled segments of its own. Ids we never mapped are
  // ignored: dropping them cannot hurt us.
  onDropped(ids) {
    if (this.acceptsPool && validSegmentIds(ids)) this.handle.forgetSegments(ids);
  }

  // The capability announcement this end sends first, or null.
  announcement(ringsOffered) {
    if (!this.canTake && !ringsOffered) return null;
    const caps = ringsOffered
      ? { cmd: CMD.CAPABILITIES, v: CAPABILITIES_VERSION, segments: this.canTake, rings: RINGS_VERSION }
      : { cmd: CMD.CAPABILITIES, v: CAPABILITIES_VERSION, segments: true };
    if (this.acceptsPool) caps.pool = true;
    return caps;
  }

  stop() {
    if (this.poolTimer !== null) {
      clearTimeout(this.poolTimer);
      this.poolTimer = null;
    }
  }

  #sendIds(cmd, ids) {
    const writer = this.host[kWriter];
    for (let i = 0; i < ids.length; i += MAX_SEGMENT_IDS) {
      writer.sendControl({ cmd, ids: ids.slice(i, i + MAX_SEGMENT_IDS) });
    }
  }
}

module.exports = { SegmentFlow, validSegmentIds, MAX_SEGMENT_IDS };
