'use strict';
// Builds the addon from source, run by hand (`node
// node_modules/procwire/scripts/install.js`): the package has no install
// script, because a prebuilt binary for this platform and Node line
// (prebuilds/<platform>-<arch>/procwire.abi<ABI>.node, shipped in the
// package) is loaded at run time by lib/native.js and needs nothing at
// install (an install script makes npm 11 warn and pnpm 10 skip it). Where
// no prebuilt binary loads (musl, old glibc), this builds one (node-gyp, a
// C++ compiler, make and Python) into build/Release; if that cannot be
// done, procwire keeps running on its pure-JavaScript fallback
// (procwire.native === false), saying so once at run time.
//
// Whatever happens, the install prints one line: node-gyp's own output goes
// to a log file, named in that line when the build fails, because forty
// lines of `gyp ERR!` bury the one fact a user needs (it still works, only
// slower) and read like a failed install.
//
//   PROCWIRE_BUILD_FROM_SOURCE=1   skip the prebuilt binary
//   PROCWIRE_INSTALL_VERBOSE=1     show node-gyp's output as it runs

const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const root = path.join(__dirname, '..');
const target = `${process.platform}-${process.arch}`;
const prebuild = path.join(root, 'prebuilds', target, `procwire.abi${process.versions.modules}.node`);
const what = `${target} Node ${process.versions.node} (ABI ${process.versions.modules})`;
const fallback = 'procwire will use its pure-JavaScript fallback (same API and wire format, lower throughput)';

function prebuildLoads() {
  try {
    require(prebuild);
    return true;
  } catch {
    return false;
  }
}

// Finds an executable on PATH without running it.
function onPath(name) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (!dir) continue;
    try {
      fs.accessSync(path.join(dir, name), fs.constants.X_OK);
      return true;
    } catch {}
  }
  return false;
}

function main() {
  if (process.env.PROCWIRE_BUILD_FROM_SOURCE !== '1' && prebuildLoads()) {
    console.log(`procwire: using the prebuilt addon for Node ${process.versions.node} (${path.relative(root, prebuild)})`);
    return;
  }
  const reason = process.env.PROCWIRE_BUILD_FROM_SOURCE === '1'
    ? 'PROCWIRE_BUILD_FROM_SOURCE=1'
    : fs.existsSync(prebuild) ? `the prebuilt addon for ${what} does not load` : `no prebuilt addon for ${what}`;

  // Without a compiler node-gyp can only fail, after perhaps downloading
  // Node's headers first: say so at once instead.
  const cxx = process.env.CXX ? onPath(process.env.CXX) || fs.existsSync(process.env.CXX)
    : ['c++', 'g++', 'clang++'].some(onPath);
  if (!cxx || !onPath('make')) {
    console.warn(`procwire: ${reason} and no C++ compiler/make to build one; ${fallback}.`);
    return;
  }

  // npm_config_node_gyp names node-gyp's script when npm runs this; run by
  // hand, the node-gyp npm ships beside this Node is used, else one on PATH.
  const bundled = path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules',
    'node-gyp', 'bin', 'node-gyp.js');
  const gypScript = process.env.npm_config_node_gyp || (fs.existsSync(bundled) ? bundled : undefined);
  const [file, args] = gypScript ? [process.execPath, [gypScript, 'rebuild']] : ['node-gyp', ['rebuild']];
  const verbose = process.env.PROCWIRE_INSTALL_VERBOSE === '1';
  // The package ships binding.gyp under another name (at its root, npm and
  // pnpm would take it for an install script to run); node-gyp wants it here.
  const gyp = path.join(root, 'binding.gyp');
  const shipped = path.join(__dirname, 'binding.gyp.in');
  if (!fs.existsSync(gyp) && fs.existsSync(shipped)) fs.copyFileSync(shipped, gyp);
  const r = spawnSync(file, args, {
    cwd: root,
    stdio: verbose ? 'inherit' : 'pipe',
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (r.status === 0) {
    console.log(`procwire: ${reason}; built the addon from source`);
    return;
  }
  const why = r.error ? r.error.message : `node-gyp exited with ${r.status === null ? r.signal : r.status}`;
  let where = '';
  if (!verbose) {
    const log = path.join(root, 'build-install.log');
    try {
      fs.writeFileSync(log, `$ ${file} ${args.join(' ')}\n${r.stdout || ''}${r.stderr || ''}`);
      where = `; log: ${log}`;
    } catch {}
  }
  console.warn(`procwire: ${reason} and the source build failed (${why}${where}); ${fallback}.`);
}

main();
