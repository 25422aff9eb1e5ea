'use strict';
// Where a task goes: the least-loaded ready worker with room (fewer than
// concurrentTasksPerWorker tasks) and no aborted task still to stop, else
// the back of a bounded FIFO queue.
// Workers are few (one per CPU or so), so a linear scan for the least
// loaded is cheaper than keeping a heap in order on every completion.

// A FIFO of tasks. A task cancelled while queued is not spliced out (that
// would be O(n)): it stays as a tombstone, its state no longer QUEUED, and
// is skipped when it reaches the front. `size` counts live tasks only;
// tombstones are compacted away when they outnumber them.
class TaskQueue {
  constructor(isLive) {
    this.items = [];
    this.head = 0;
    this.size = 0;
    this.tombstones = 0;
    this.isLive = isLive;
  }

  push(task) {
    this.items.push(task);
    this.size++;
  }

  // A task taken off but not sent goes back first in line.
  unshift(task) {
    if (this.head > 0) this.items[--this.head] = task;
    else this.items.unshift(task);
    this.size++;
  }

  // The oldest live task, taken off the queue; undefined when there is none.
  shift() {
    const items = this.items;
    while (this.head < items.length) {
      const task = items[this.head];
      items[this.head++] = undefined;
      if (this.isLive(task)) {
        this.size--;
        this.reset();
        return task;
      }
      this.tombstones--;
    }
    this.reset();
    return undefined;
  }

  // A queued task was cancelled: it becomes a tombstone.
  removed() {
    this.size--;
    this.tombstones++;
    if (this.tombstones > 64 && this.tombstones > this.size) this.compact();
  }

  compact() {
    const live = [];
    for (let i = this.head; i < this.items.length; i++) {
      const task = this.items[i];
      if (task !== undefined && this.isLive(task)) live.push(task);
    }
    this.items = live;
    this.head = 0;
    this.tombstones = 0;
  }

  // Once drained, the array starts over (keeping its capacity); a long run
  // of shifts on a queue that never empties is trimmed now and then.
  reset() {
    if (this.head === this.items.length) {
      this.items.length = 0;
      this.head = 0;
    } else if (this.head > 4096 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }

  // Every live task, oldest first, emptying the queue (for destroy()).
  takeAll() {
    const out = [];
    for (let i = this.head; i < this.items.length; i++) {
      const task = this.items[i];
      if (task !== undefined && this.isLive(task)) out.push(task);
    }
    this.items = [];
    this.head = 0;
    this.size = 0;
    this.tombstones = 0;
    return out;
  }
}

class Scheduler {
  constructor(capacity, isLive) {
    this.capacity = capacity;  // tasks per worker at once
    this.slots = [];           // ready workers, in the order they became ready
    this.queue = new TaskQueue(isLive);
  }

  // The least-loaded ready worker with room, or null. Ties go to the first,
  // so with one task at a time the workers take turns as they free up. A
  // worker still stopping an aborted task gets none: if the task does not
  // stop, the worker is killed, and what it was given meanwhile with it.
  pick() {
    const slots = this.slots;
    let best = null;
    let bestLoad = this.capacity;
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i];
      if (slot.load < bestLoad && slot.stopping === 0) {
        best = slot;
        bestLoad = slot.load;
        if (bestLoad === 0) break;
      }
    }
    return best;
  }

  addSlot(slot) {
    this.slots.push(slot);
  }

  // Up to `count` ready workers with no task, idle since `limit` or
  // before, taken out (those ready longest first).
  takeIdle(limit, count) {
    const out = [];
    for (let i = 0; i < this.slots.length && out.length < count;) {
      const slot = this.slots[i];
      if (slot.load === 0 && slot.idleSince <= limit) out.push(this.slots.splice(i, 1)[0]);
      else i++;
    }
    return out;
  }

  removeSlot(slot) {
    const i = this.slots.indexOf(slot);
    if (i !== -1) this.slots.splice(i, 1);
  }
}

module.exports = { Scheduler, TaskQueue };
