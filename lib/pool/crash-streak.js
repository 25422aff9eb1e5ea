'use strict';
// What stops a pool from forking without end a module that keeps failing.
//
// - Crashes: ready workers that end (die, or hang up) before finishing
//   anything, one after another. Past MAX_STREAK the pool stops replacing
//   them to keep minWorkers (tasks that wait still get a worker); any
//   answer ends the streak, since the module evidently works.
// - Failed starts while another worker is ready (a fork that fails, a
//   module that throws at load now and then): each is replaced, until
//   MAX_STREAK of them in a row; then the pool stops forking while it has a
//   ready worker. Only a worker that gets ready ends this streak: an answer
//   from a worker started earlier says nothing of whether a start works
//   now, and ending the streak on it would fork once per answer for ever.
// (With no ready worker, a failed start fails the waiting tasks instead,
// and the next run() tries once more: pool.js.)

const MAX_STREAK = 5;

class CrashStreak {
  constructor() {
    this.crashes = 0;
    this.failedStarts = 0;
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

  startFailed() {
    this.failedStarts++;
  }

  // A worker got ready -> whether that ended a streak of failed starts
  // that had stopped the pool forking.
  started() {
    const stopped = this.failedStarts >= MAX_STREAK;
    this.failedStarts = 0;
    return stopped;
  }

  // No worker is forked to keep minWorkers.
  get stopped() {
    return this.crashes >= MAX_STREAK || this.failedStarts >= MAX_STREAK;
  }

  // Nor for tasks that wait, while a worker is ready to take them.
  get startsStopped() {
    return this.failedStarts >= MAX_STREAK;
  }

  reset() {
    this.crashes = 0;
    this.failedStarts = 0;
  }
}

module.exports = { CrashStreak, MAX_STREAK };
