'use strict';
// The ChildProcess surface's inbox. Like Node: a message is emitted on a
// later tick than the read that brought it, in order, and kept until a
// 'message' listener exists; nothing is emitted once disconnected. Node
// queues one tick per message; here one tick emits everything delivered
// before it runs, which keeps the same order (in both, what a handler
// queues with nextTick or a promise runs after the messages already read)
// at a fraction of the cost.

const { discardHandle } = require('./handle-conversion');
const { kInbox } = require('../channel/symbols');

// Entries (three per message) the inbox keeps its capacity for between
// batches.
const INBOX_KEEP = 3 * 1024;

function emitInbox(inbox) {
  inbox.emitAll();
}

function emitPending(inbox) {
  inbox.emitPending();
}

class SurfaceInbox {
  constructor(child, channel) {
    this.child = child;
    this.channel = channel;
    // Whether the channel hands its user messages to this surface
    // (`consume`) or keeps them in its bounded backlog (no 'message'
    // listener here).
    this.consumerAttached = true;
    // A message the channel's own 'message' listeners take (a driver on
    // child.channel) has been delivered: it is not also kept for a
    // 'message' listener the child may get later. Kept, every message of
    // such a channel stayed in the pending list for good, and collecting
    // that growing heap made the channel run at a third of a named
    // channel's speed (issue 35).
    this.consume = (message, handle) => {
      if (handle === undefined && child.listenerCount('message') === 0 && channel.listenerCount('message') > 0) return;
      this.deliver(message, handle, false);
    };
    // [event, message, handle] kept until a 'message' listener exists.
    this.pending = [];
    // Whether 'message' has listeners, asked once per batch and again after
    // a listener came (`child` may be `process`, whose properties V8 keeps
    // in a dictionary: asking per message measured several percent of a
    // small message's cost). A listener that went is seen by emit() itself,
    // which returns false when it found none: that message is kept, as Node
    // keeps it when it asks before emitting. null: ask.
    this.listened = null;
    // [event, message, handle] triples, flattened. entries[0, end) is in
    // use; the array keeps its capacity between batches (cleared, not
    // shortened), so a batch does not grow it again.
    this.entries = [];
    this.next = 0;
    this.end = 0;
  }

  // One message (internal: for 'internalMessage') for a later tick.
  deliver(message, handle, internal) {
    if (!this.child.channel) {
      discardHandle(handle);
      return;
    }
    if (this.end === 0) process.nextTick(emitInbox, this);
    const entries = this.entries;
    const end = this.end;
    entries[end] = internal ? 'internalMessage' : 'message';
    entries[end + 1] = message;
    entries[end + 2] = handle;
    this.end = end + 3;
  }

  emitAll() {
    this.listened = null;
    const entries = this.entries;
    try {
      while (this.next < this.end) {
        const i = this.next;
        this.next += 3;
        const event = entries[i];
        const message = entries[i + 1];
        const handle = entries[i + 2];
        entries[i + 1] = undefined;
        entries[i + 2] = undefined;
        this.#emitNow(event, message, handle);
      }
    } finally {
      // A handler that threw leaves the rest to a later tick, as Node's
      // tick queue keeps the messages queued behind the one that threw.
      if (this.next < this.end) {
        process.nextTick(emitInbox, this);
      } else {
        this.end = 0;
        this.next = 0;
        // A burst far larger than usual does not pin its memory.
        if (entries.length > INBOX_KEEP) entries.length = 0;
      }
    }
  }

  #emitNow(event, message, handle) {
    const child = this.child;
    if (event === 'internalMessage') {
      child.emit(event, message, handle);
      return;
    }
    if (this.listened === null) this.listened = child.listenerCount('message') > 0;
    if (this.listened && child.emit(event, message, handle) !== false) return;
    this.listened = false;
    this.pending.push([event, message, handle]);
    // Until a listener comes, the channel keeps what it reads next in its
    // own backlog, which stops reading at its bound (10,000 messages or
    // 64 MiB) and drops nothing; here waits at most what was read before.
    if (this.consumerAttached) {
      this.consumerAttached = false;
      this.channel[kInbox].setConsumer(null);
    }
  }

  // A listener came: ask again, and hand it what was kept.
  onNewListener() {
    this.listened = null;
    process.nextTick(emitPending, this);
  }

  emitPending() {
    const child = this.child;
    if (!child.channel || child.listenerCount('message') === 0) return;
    const list = this.pending.splice(0);
    for (const args of list) child.emit(...args);
    // Then the channel's backlog, behind them (drained on a later tick).
    if (!this.consumerAttached && this.pending.length === 0 && child.listenerCount('message') > 0) {
      this.consumerAttached = true;
      this.channel[kInbox].setConsumer(this.consume);
    }
  }

  // A message with a handle queues behind the channel's backlog while that
  // holds messages, so it never overtakes the ones read before it.
  deliverHandled(message, handle, internal) {
    const inbox = this.channel[kInbox];
    if (!internal && this.child.channel && (!this.consumerAttached || inbox.backlog.length > 0)) {
      inbox.deliverWithHandle(message, handle, false);
    } else {
      this.deliver(message, handle, internal);
    }
  }
}

module.exports = { SurfaceInbox };
