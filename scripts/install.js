'use strict';
// npm's install hook. A prebuilt binary for this platform and Node line
// (prebuilds/<platform>-<arch>/procwire.abi<ABI>.node, shipped in the
// package) needs nothing more. Without one that loads, the addon is built
// from source (node-gyp, a C++ compiler and Python); if that fails too, the
// install still succeeds and procwire runs on its pure-JavaScript fallback
// (procwire.native === false), saying so once at run time.
//
//   PROCWIRE_BUILD_FROM_SOURCE=1   skip the prebuilt binary

const path = require('path');
const { spawnSync } = require('child_process');

const root = path.join(__dirname, '..');
const prebuild = path.join(root, 'prebuilds', `${process.platform}-${process.arch}`,
  `procwire.abi${process.versions.modules}.node`);

function prebuildLoads() {
  try {
    require(prebuild);
    return true;
  } catch {
    return false;
  }
}

if (process.env.PROCWIRE_BUILD_FROM_SOURCE !== '1' && prebuildLoads()) {
  console.log(`procwire: using the prebuilt addon for Node ${process.versions.node} (${path.relative(root, prebuild)})`);
  process.exit(0);
}

// npm puts node-gyp on PATH for lifecycle scripts; npm_config_node_gyp names
// its script when set.
const gypScript = process.env.npm_config_node_gyp;
const r = gypScript
  ? spawnSync(process.execPath, [gypScript, 'rebuild'], { cwd: root, stdio: 'inherit' })
  : spawnSync('node-gyp', ['rebuild'], { cwd: root, stdio: 'inherit' });
if (r.status === 0) process.exit(0);

const why = r.error ? r.error.message : `node-gyp exited with ${r.status === null ? r.signal : r.status}`;
console.warn(`procwire: no prebuilt addon for ${process.platform}-${process.arch} Node ${process.versions.node} ` +
  `(ABI ${process.versions.modules}) and the source build failed (${why}). procwire will use its ` +
  'pure-JavaScript fallback: same API and wire format, lower throughput.');
process.exit(0);
