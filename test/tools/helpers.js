'use strict';
// Shared by the real-use suites of tools that fork (test/tools/*.suite.js),
// which scripts/tool-suites.sh runs plain and with
// NODE_OPTIONS="--require procwire/register". The tools come from the
// private prefix .test-deps/ that script installs; their published packages
// ship no tests of their own, so these suites use each tool as its users do.

const path = require('path');

const DEPS = path.join(__dirname, '..', '..', '.test-deps', 'node_modules');

function tool(name) {
  return require(path.join(DEPS, name));
}

function toolPath(name) {
  return path.join(DEPS, name);
}

// Whether this run has the hook: its workers must then be forked through
// procwire, and otherwise not (so a run where the hook silently did nothing
// fails instead of passing plainly twice).
const REGISTERED = /--require\s+\S*register(\.js)?(\s|$)/.test(process.env.NODE_OPTIONS || '');

// What a worker reports about itself: whether procwire's child preload (the
// native child side a procwire fork adds) runs in it.
function forkedByProcwire() {
  return Object.keys(require.cache).some((f) => f.endsWith(`${path.sep}child-preload.js`));
}

// Bytes made from `seed`, so both ends can check a payload without sending
// its checksum separately.
function payload(size, seed) {
  const buf = Buffer.alloc(size);
  for (let i = 0; i < size; i++) buf[i] = (i * 31 + seed) & 0xff;
  return buf;
}

// Resolves once process `pid` is gone; fails if it still runs 10 s later
// (`after` names the call that should have stopped it).
async function assertGone(pid, after) {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`worker ${pid} still runs after ${after}`);
}

module.exports = { tool, toolPath, REGISTERED, forkedByProcwire, payload, assertGone };
