'use strict';
// PoolStats: what a Pool counts for stats() — tasks settled each way, the
// run and wait time histograms, and the busy time of workers that are gone
// — and the summary it makes of them with the live workers. The Pool
// counts into it as tasks settle; it holds no worker or task.

const { Histogram, batchNow } = require('./histogram');

class PoolStats {
  constructor() {
    this.created = batchNow();
    this.completed = 0;
    this.failed = 0;
    this.cancelled = 0;
    this.runTime = new Histogram();
    this.waitTime = new Histogram();
    // Busy time of the workers that have exited.
    this.busyMsOfGone = 0;
  }

  // A worker exited: its busy time (to now, if it held tasks) stays counted.
  workerGone(slot) {
    this.busyMsOfGone += slot.busyMs + (slot.tasks.size > 0 ? batchNow() - slot.busySince : 0);
  }

  // live: every worker not yet exited (tasks at workers the pool let go
  // count until they settle); workers: their descriptions.
  summary(live, queued, workers, maxWorkers) {
    const at = batchNow();
    const duration = at - this.created;
    let busy = this.busyMsOfGone;
    let running = 0;
    for (const slot of live) {
      busy += slot.busyMs + (slot.load > 0 ? at - slot.busySince : 0);
      running += slot.load;
    }
    return {
      completed: this.completed,
      failed: this.failed,
      cancelled: this.cancelled,
      queued,
      running,
      workers,
      runTime: this.runTime.summary(),
      waitTime: this.waitTime.summary(),
      // The share of the workers' time spent with at least one task, over
      // the pool's life and maxWorkers workers (piscina's measure).
      utilization: duration > 0 ? Math.min(1, busy / (duration * maxWorkers)) : 0,
      duration,
    };
  }
}

module.exports = { PoolStats };
