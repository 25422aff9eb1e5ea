'use strict';
// Processes started in a process group of their own, so that one kill reaches
// whatever they started as well. Such a group is outside the test file's own
// group, which is the one `timeout` in scripts/test.sh signals: the groups
// still running are therefore killed here when this process exits or is told
// to stop, or they would outlive the test run.

const childProcess = require('child_process');

// Group ids (the leaders' pids) of the groups started here and not yet killed.
const live = new Set();
let installed = false;

function killAll() {
  for (const pid of live) {
    try { process.kill(-pid, 'SIGKILL'); } catch { /* the group is gone */ }
  }
  live.clear();
}

function installHandlers() {
  if (installed) return;
  installed = true;
  process.on('exit', killAll);
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    process.once(signal, () => {
      killAll();
      // Then the signal's own effect, unless someone else handles it: with
      // this listener gone, raising it again ends the process as it would have.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  }
}

// childProcess.spawn in a new process group (detached), remembered until
// killGroup(child).
function spawnGroup(command, args, options = {}) {
  installHandlers();
  const child = childProcess.spawn(command, args, { ...options, detached: true });
  if (child.pid !== undefined) live.add(child.pid);
  return child;
}

// SIGKILL to the child's whole group: the child and all it started that is
// still in its group. Safe to call more than once.
function killGroup(child) {
  if (child.pid === undefined) return;
  try { process.kill(-child.pid, 'SIGKILL'); } catch { /* the group is gone */ }
  live.delete(child.pid);
}

module.exports = { spawnGroup, killGroup };
