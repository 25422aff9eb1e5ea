'use strict';
// Loads the binding once per realm and hands it the real Buffer constructor
// (captured here, before user code can swap it) and the coded-error factory.
//
// Which binding, in order:
//   1. $PROCWIRE_ADDON, when set (it must load: its error is the one shown);
//   2. prebuilds/linux-x64/procwire.abi<process.versions.modules>.node, the
//      binary the package ships for this Node line (glibc);
//   3. build/Release/procwire.node (a source build; build/Debug after it);
//   4. none loads, or PROCWIRE_FORCE_FALLBACK=1: lib/fallback/binding.js, the
//      pure-JavaScript codec and framer (wire-identical, slower), with one
//      process warning (code PROCWIRE_FALLBACK). Sockets then run on the
//      `net` backend (lib/transport/fallback.js), chosen in
//      lib/transport/index.js, and fork() on a libuv pipe (lib/fork.js).
// `native` tells which is in use (procwire.native).

const { Buffer } = require('buffer');
const fs = require('fs');
const path = require('path');
const { makeError } = require('./errors');

// The package's directory. The candidates' paths are joined by hand rather
// than with path.join(): the package runs on Linux only (its package.json),
// these paths are absolute and normal, and on Node 26 that first path.join()
// of a native child's start cost it about 1 ms of CPU to its first answer
// (interleaved runs against path.join, medians of 150 and 200).
const root = __dirname.slice(0, __dirname.lastIndexOf('/'));

function prebuildPath() {
  return `${root}/prebuilds/${process.platform}-${process.arch}/procwire.abi${process.versions.modules}.node`;
}

// Node 20's --experimental-policy checks an addon's integrity in require()
// only (Node 22 removed policies).
const POLICY_FLAG = /(^|\s)--experimental-policy\b/;

// One of the candidates below, a file known to exist. process.dlopen() is
// what require() ends in for a .node file; called directly it skips the
// loader's resolution of a path that is already absolute (a stat, a
// realpath, the module's node_modules paths), about 0.2 ms of a forked
// child's start. The addon is then not in require.cache, which nothing
// reads: this file is the only one that loads it. Under a policy, require()
// does the loading, so the policy's integrity check still applies.
function loadAddon(file) {
  if (process.execArgv.some((arg) => POLICY_FLAG.test(arg)) || POLICY_FLAG.test(process.env.NODE_OPTIONS ?? '')) {
    return require(file);
  }
  const addon = { exports: {} };
  process.dlopen(addon, path.toNamespacedPath(file));
  return addon.exports;
}

function loadNative() {
  const explicit = process.env.PROCWIRE_ADDON;
  if (explicit) {
    try {
      // A path to a .node file is loaded as a found candidate is, a
      // relative one from the current directory (as a user who sets it in a
      // shell means it); anything else (a name without .node) is resolved
      // by require().
      const file = explicit.endsWith('.node') ? path.resolve(explicit) : null;
      return { binding: file !== null ? loadAddon(file) : require(explicit), file: file ?? explicit };
    } catch (err) {
      throw makeError('ERR_PROCWIRE_NATIVE_UNAVAILABLE',
        `PROCWIRE_ADDON=${explicit} could not be loaded: ${err.message}`, err);
    }
  }
  const candidates = [
    prebuildPath(),
    `${root}/build/Release/procwire.node`,
    `${root}/build/Debug/procwire.node`,
  ];
  const errors = [];
  for (const file of candidates) {
    // A missing candidate is skipped without a require() that throws (its
    // error and stack cost a start-up as much as loading the addon).
    if (!fs.existsSync(file)) continue;
    try {
      return { binding: loadAddon(file), file };
    } catch (err) {
      if (err && err.code !== 'MODULE_NOT_FOUND') errors.push(`${path.relative(root, file)}: ${err.message}`);
    }
  }
  return { binding: null, reason: errors.length > 0 ? errors.join('; ') : 'no prebuilt or built addon for this platform and Node' };
}

function load() {
  if (process.env.PROCWIRE_FORCE_FALLBACK === '1') {
    return { binding: require('./fallback/binding'), native: false, file: null, reason: 'PROCWIRE_FORCE_FALLBACK=1' };
  }
  const found = loadNative();
  if (found.binding !== null) return { binding: found.binding, native: true, file: found.file, reason: null };
  return { binding: require('./fallback/binding'), native: false, file: null, reason: found.reason };
}

const loaded = load();
const binding = loaded.binding;
binding.setup(Buffer, makeError);

if (!loaded.native) {
  process.emitWarning(
    `procwire is using its pure-JavaScript fallback (${loaded.reason}): same API and wire format, ` +
    'lower throughput, and no peer uid checks (SO_PEERCRED). Build the native addon from source with ' +
    '`node node_modules/procwire/scripts/install.js` (needs a C++ compiler, make and Python).',
    { code: 'PROCWIRE_FALLBACK' });
}

module.exports = {
  binding,
  // true: the C++ addon (prebuilt or built); false: lib/fallback/binding.js.
  native: loaded.native,
  // The addon file in use (null for the fallback), and why the fallback is.
  addonFile: loaded.file,
  fallbackReason: loaded.reason,
};
