'use strict';
// Whether a pool's workers keep this process alive: while it has tasks, and
// while it is closing, they do; once it has none they stop, after a short
// while rather than at once, so back-to-back single tasks do not pay six
// ref()/unref() calls each. The one timer is re-armed, not made again.

// How long an idle pool's workers still keep the process alive.
const UNREF_AFTER_MS = 50;

class WorkerRefs {
  // live: the pool's workers (a Set); stillIdle(): whether the pool still
  // has no task when the timer fires.
  constructor(live, stillIdle) {
    this.live = live;
    this.stillIdle = stillIdle;
    this.refed = true;
    this.timer = null;
  }

  set(on) {
    this.refed = on;
    for (const slot of this.live) slot.setRef(on);
  }

  // A new worker takes the pool's current state.
  adopt(slot) {
    if (!this.refed) slot.setRef(false);
  }

  // The pool has no task now.
  idleSoon() {
    if (!this.refed) return;
    if (this.timer === null) {
      this.timer = setTimeout(() => {
        if (this.stillIdle()) this.set(false);
      }, UNREF_AFTER_MS);
      this.timer.unref();
    } else {
      this.timer.refresh();
    }
  }

  // The pool is ending: no timer may unref its workers any more.
  stop() {
    if (this.timer !== null) clearTimeout(this.timer);
  }
}

module.exports = { WorkerRefs };
