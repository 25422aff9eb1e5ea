'use strict';
// Inbox: where a Channel's user messages go. To the consumer (the
// ChildProcess surface, lib/child-process/) and then 'message'
// listeners; while neither listens they wait in a backlog bounded by count
// and bytes, and past the bound reading stops until someone listens.

const { discardHandle } = require('../child-process/handle-conversion');
const { MAX_BACKLOG, MAX_BACKLOG_BYTES } = require('./settings');
const { HOLD_BACKLOG } = require('./reader');
const { kPhase, kReader, kApplyRefPolicy } = require('./symbols');

// A backlogged message that came with a handle.
class WithHandle {
  constructor(message, handle) {
    this.message = message;
    this.handle = handle;
  }
}

function drainInbox(inbox) {
  inbox.drain();
}

function applyRefPolicy(host) {
  host[kApplyRefPolicy]();
}

class Inbox {
  constructor(host) {
    this.host = host;
    this.backlog = [];
    this.sizes = [];
    this.bytes = 0;
    // `consumer(message, handle)` receives user messages before 'message'
    // listeners do, and counts as one for the backlog and the ref policy.
    this.consumer = null;
  }

  // Whether a user message has somewhere to go now: a 'message' listener,
  // or the consumer of the surface built on this channel.
  hasTaker() {
    return this.consumer !== null || this.host.listenerCount('message') > 0;
  }

  // One user message of `bytes` (its share of its batch).
  deliver(message, bytes) {
    if (this.backlog.length > 0 || !this.hasTaker()) {
      this.backlog.push(message);
      this.sizes.push(bytes);
      this.bytes += bytes;
      const reader = this.host[kReader];
      if ((this.backlog.length >= MAX_BACKLOG || this.bytes >= MAX_BACKLOG_BYTES) && !reader.isHeld(HOLD_BACKLOG)) {
        reader.hold(HOLD_BACKLOG);
      }
      return;
    }
    this.emit(message, undefined);
  }

  // A message that came with a handle (or was queued behind one), for this
  // channel's own listeners.
  deliverWithHandle(message, handle, internal) {
    const host = this.host;
    if (host[kPhase] === 'closed') {
      discardHandle(handle);
      return;
    }
    if (internal) {
      host.emit('internalMessage', message, handle);
      return;
    }
    if (this.backlog.length > 0 || !this.hasTaker()) {
      this.backlog.push(new WithHandle(message, handle));
      this.sizes.push(0);
      return;
    }
    this.emit(message, handle);
  }

  // One user message to the consumer (if any), then to 'message' listeners.
  // The ChildProcess surface is the consumer: it takes every message as a
  // plain call, without EventEmitter's emit and its argument array.
  emit(message, handle) {
    if (this.consumer !== null) this.consumer(message, handle);
    const host = this.host;
    if (host.listenerCount('message') > 0) {
      if (handle === undefined) host.emit('message', message);
      else host.emit('message', message, handle);
    }
  }

  setConsumer(consumer) {
    this.consumer = consumer;
    if (this.backlog.length > 0) process.nextTick(drainInbox, this);
    process.nextTick(applyRefPolicy, this.host);
  }

  // A listener came: what waited is delivered on the next tick.
  scheduleDrain() {
    if (this.backlog.length > 0) process.nextTick(drainInbox, this);
  }

  drain() {
    const host = this.host;
    while (this.backlog.length > 0 && this.hasTaker() && host[kPhase] !== 'closed') {
      this.bytes -= this.sizes.shift();
      const item = this.backlog.shift();
      if (item instanceof WithHandle) this.emit(item.message, item.handle);
      else this.emit(item, undefined);
    }
    if (this.backlog.length === 0) this.bytes = 0;
    const reader = host[kReader];
    if (this.backlog.length === 0 && reader.isHeld(HOLD_BACKLOG)) reader.release(HOLD_BACKLOG);
  }
}

module.exports = { Inbox };
