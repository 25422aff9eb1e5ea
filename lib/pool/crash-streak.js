'use strict';
// What stops a pool from forking without end a module that keeps failing.
//
// - Crashes: ready workers that end (die, or hang up) before finishing
//   anything, one after another. Past MAX_STREAK the pool stops replacing
//   them to keep minWorkers (tasks that wait still get a worker); any
//   answer ends the streak, since the module evidently works.
// - Failed starts while another worker is ready (a fork that fails, a
//   module that throws at load now and then, a process limit reached for a
//   while): each is replaced, until MAX_STREAK of them in a row; from then
//   on the pool waits before it tries another start, a pause that doubles
//   with each failure (1 s, 2 s, ... up to a minute), and its ready workers
//   take the tasks meanwhile. Only a worker that gets ready ends this
//   streak: an answer from a worker started earlier says nothing of whether
//   a start works now, and ending the streak on it would fork once per
//   answer. A pause rather than a stop, because what failed may pass (a
//   burst of descriptors or processes used up): a pool that stopped for
//   good would stay short of workers for the rest of its life.
// (With no ready worker, a failed start fails the waiting tasks instead,
// and the next run() tries once more: pool.js.)

const MAX_STREAK = 5;
const FIRST_PAUSE_MS = 1000;
const MAX_PAUSE_MS = 60_000;

class CrashStreak {
  // retry(): the pool forks what it lacks (to minWorkers, and for tasks that
  // wait), unless a streak holds it back.
  constructor(retry) {
    this.crashes = 0;
    this.failedStarts = 0;
    this.pausedUntil = 0;    // performance.now() before which no start is tried
    this.retry = retry;
    this.retryTimer = null;
  }

  // After a failed start while a worker is ready: the pool tries again now
  // (ms 0) or later, one timer at a time.
  retryIn(ms) {
    if (ms === 0) {
      this.retry();
      return;
    }
    if (this.retryTimer !== null) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      // The pause is over when its timer says so: a timer may fire a
      // fraction of a millisecond before performance.now() reaches the
      // pause's end, and a start refused then would never be tried again.
      this.pausedUntil = 0;
      this.retry();
    }, ms);
    this.retryTimer.unref();
  }

  // The pool ended: no start is tried again.
  cancelRetry() {
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  // A ready worker ended: having finished nothing, it extends the streak;
  // having finished a task, it ends it.
  ended(slot) {
    this.crashes = slot.completed === 0 ? this.crashes + 1 : 0;
  }

  // A worker answered a task -> whether that ended a crash streak.
  answered() {
    if (this.crashes === 0) return false;
    this.crashes = 0;
    return true;
  }

  // A start failed while a worker is ready -> how long (ms) before the next
  // start may be tried: 0 at once, while the streak is short.
  startFailed() {
    this.failedStarts++;
    if (this.failedStarts < MAX_STREAK) return 0;
    const pause = Math.min(MAX_PAUSE_MS, FIRST_PAUSE_MS * 2 ** (this.failedStarts - MAX_STREAK));
    this.pausedUntil = performance.now() + pause;
    return pause;
  }

  // A worker got ready -> whether that ended a streak of failed starts
  // that had paused the pool's forking.
  started() {
    const paused = this.failedStarts >= MAX_STREAK;
    this.failedStarts = 0;
    this.pausedUntil = 0;
    return paused;
  }

  // No worker is forked to keep minWorkers.
  get stopped() {
    return this.crashes >= MAX_STREAK || this.startsPaused;
  }

  // Nor for tasks that wait, while a worker is ready to take them.
  get startsPaused() {
    return this.failedStarts >= MAX_STREAK && performance.now() < this.pausedUntil;
  }

  reset() {
    this.crashes = 0;
    this.failedStarts = 0;
    this.pausedUntil = 0;
  }
}

module.exports = { CrashStreak, MAX_STREAK };
