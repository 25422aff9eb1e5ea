'use strict';
// Objects by their numeric `id` (a pool worker's tasks in WorkerSlot, the
// abortable tasks a worker runs): an open-addressed table (linear probing
// from a scattered id) in one plain array.
//
// Why not a Map: a Map whose entries come and go all the time (a busy
// worker's tasks) rebuilds its backing table every few hundred changes,
// and V8 links each old table to its successor (for iterators that were
// made on the old one). Once one old table has reached the old generation,
// that dead table keeps its successor, and the tasks, promises and closures
// it holds, alive through every young-generation scavenge; they get
// promoted in turn and keep the next table alive, and so on until a full
// mark-compact. In about half the runs of a busy pool, its process then
// spent a third of its time in the garbage collector. This table's array,
// when it grows, is simply dropped: nothing points from it to the new one.
//
// One worker's ids follow patterns (runs of consecutive ids, or every
// other id while two workers take turns), which would pile up on the same
// entries if the low bits picked the place: the id is scattered first
// (Fibonacci hashing, the top bits of id times 2^32 / golden ratio). The
// table is kept at most half full.

const MIN_BITS = 4;
const GOLDEN = 0x9e3779b1;

// The place of `id` in a table of 2 ** bits entries.
function home(id, shift) {
  return Math.imul(id, GOLDEN) >>> shift;
}

class TaskTable {
  constructor() {
    this.reset(MIN_BITS);
  }

  reset(bits) {
    this.entries = new Array(1 << bits).fill(undefined);
    this.mask = (1 << bits) - 1;
    this.shift = 32 - bits;
    this.size = 0;
  }

  // The task with this id, or undefined.
  get(id) {
    const entries = this.entries;
    const mask = this.mask;
    for (let i = home(id, this.shift); ; i = (i + 1) & mask) {
      const task = entries[i];
      if (task === undefined || task.id === id) return task;
    }
  }

  // Adds a task (any object with a numeric id) under its own id, which
  // must not be here yet.
  add(task) {
    if (2 * (this.size + 1) > this.entries.length) this.grow();
    this.place(task);
    this.size++;
  }

  place(task) {
    const entries = this.entries;
    const mask = this.mask;
    let i = home(task.id, this.shift);
    while (entries[i] !== undefined) i = (i + 1) & mask;
    entries[i] = task;
  }

  grow() {
    const old = this.entries;
    const size = this.size;
    this.reset(33 - this.shift);
    this.size = size;
    for (let i = 0; i < old.length; i++) {
      if (old[i] !== undefined) this.place(old[i]);
    }
  }

  // Removes the task with this id; whether there was one.
  delete(id) {
    return this.take(id) !== undefined;
  }

  // Removes the task with this id and returns it (undefined if none): one
  // search where get() then delete() would make two, for every answer a
  // worker gives. The entries after it in its run move back into the gap,
  // so every lookup still finds its task before an empty entry (no
  // tombstones to clean up later).
  take(id) {
    const entries = this.entries;
    const mask = this.mask;
    const shift = this.shift;
    let gap = home(id, shift);
    let found;
    for (;;) {
      found = entries[gap];
      if (found === undefined) return undefined;
      if (found.id === id) break;
      gap = (gap + 1) & mask;
    }
    for (let j = (gap + 1) & mask; entries[j] !== undefined; j = (j + 1) & mask) {
      const at = home(entries[j].id, shift);
      // The entry at j may fill the gap unless its home lies cyclically in
      // (gap, j]: then a lookup starting there would no longer reach it.
      const stays = gap <= j ? at > gap && at <= j : at > gap || at <= j;
      if (!stays) {
        entries[gap] = entries[j];
        gap = j;
      }
    }
    entries[gap] = undefined;
    this.size--;
    return found;
  }

  // Every task held, oldest (lowest id) first, as a new array: the caller
  // may change the table while it goes through them.
  values() {
    const out = [];
    for (const task of this.entries) {
      if (task !== undefined) out.push(task);
    }
    return out.sort((a, b) => a.id - b.id);
  }

  clear() {
    this.reset(MIN_BITS);
  }
}

module.exports = { TaskTable };
