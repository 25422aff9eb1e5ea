'use strict';
// Whether a process still runs, for tests whose processes end up orphaned.
// A process whose parent was killed is reparented (to init, or to a
// subreaper), and its new parent may reap it late: until then it is a
// zombie, which kill(pid, 0) still finds although the process has exited.

const fs = require('fs');

// Alive and not a zombie. Linux tells from /proc/<pid>/stat; elsewhere a
// zombie cannot be told apart, so any process kill(pid, 0) finds counts.
function running(pid) {
  if (process.platform !== 'linux') {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state follows the command name, which may hold spaces and ')'.
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

module.exports = { running };
