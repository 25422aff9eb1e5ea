'use strict';

// Descriptor accounting for leak tests. Counting /proc/self/fd is not enough on
// its own: a Buffer from an earlier test may be collected in the middle of a
// test and close its segment, so the count can fall while a new descriptor
// leaks. A snapshot names every descriptor and what it points at, so a leak is
// "a descriptor that was not there before", whatever else closed meanwhile.

const fs = require('node:fs');
const path = require('node:path');

const FD_DIR = '/proc/self/fd';

function openFds() {
  return fs.readdirSync(FD_DIR).length;
}

function describeFd(fd) {
  try {
    return fs.readlinkSync(path.join(FD_DIR, fd));
  } catch {
    // The descriptor readdir itself used is closed by the time it is read.
    return null;
  }
}

// Returns a Map from descriptor number to its target, e.g. 'socket:[1234]'.
function fdSnapshot() {
  const snapshot = new Map();
  for (const fd of fs.readdirSync(FD_DIR)) {
    const target = describeFd(fd);
    if (target !== null) snapshot.set(fd, target);
  }
  return snapshot;
}

// Descriptors open now that were not open (with the same target) in `before`,
// as 'fd -> target' strings so an assertion failure says what leaked.
function fdsOpenedSince(before) {
  const opened = [];
  for (const [fd, target] of fdSnapshot()) {
    if (before.get(fd) !== target) opened.push(`${fd} -> ${target}`);
  }
  return opened;
}

module.exports = { openFds, fdSnapshot, fdsOpenedSince };
