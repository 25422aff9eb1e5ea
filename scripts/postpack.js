'use strict';
// npm's postpack hook: refuses a package that lacks any of the prebuilt
// addons or start bundles it must ship, then removes what prepack added to
// the working tree: prebuilds/ (where a stale binary would shadow
// build/Release, lib/native.js loading prebuilds first, and prebuilds/start/
// holds the shipped start bundles, which lib/start-bundle.js looks for
// before build/'s) and scripts/binding.gyp.in (the package's copy of
// binding.gyp: a binding.gyp at the package's root makes npm and pnpm treat
// it as having a build script, which pnpm 10 then reports as ignored).
//
// The check looks at what was packed: the tarball when npm wrote one (npm
// pack; its place is npm's pack destination), and prebuilds/ as it is now
// (what npm publish packed in memory: it was complete after prepack, so if
// it still is, nothing raced the pack, such as another pack's cleanup). A
// tarball that lacks an addon is deleted and the pack fails, naming it.

const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { expectedPrebuilds } = require('./expected-prebuilds');

const root = path.join(__dirname, '..');

function tarballPath() {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const dest = process.env.npm_config_pack_destination || process.env.NPM_CONFIG_PACK_DESTINATION || root;
  const file = path.resolve(root, dest, `${pkg.name.replace(/^@/, '').replace('/', '-')}-${pkg.version}.tgz`);
  return fs.existsSync(file) ? file : null;
}

function missingFrom(have) {
  return expectedPrebuilds().filter((f) => !have.has(f));
}

function main() {
  const problems = [];
  const onDisk = missingFrom(new Set(expectedPrebuilds().filter((f) => fs.existsSync(path.join(root, f)))));
  if (onDisk.length > 0) problems.push(`prebuilds/ lacks ${onDisk.join(', ')}`);
  const tarball = tarballPath();
  if (tarball !== null) {
    const listed = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8', maxBuffer: 64 << 20 })
      .split('\n').map((l) => l.replace(/^package\//, ''));
    const inTar = missingFrom(new Set(listed));
    if (inTar.length > 0) problems.push(`${path.basename(tarball)} lacks ${inTar.join(', ')}`);
  }
  fs.rmSync(path.join(root, 'prebuilds'), { recursive: true, force: true });
  fs.rmSync(path.join(root, 'scripts', 'binding.gyp.in'), { force: true });
  if (problems.length === 0) return;
  if (tarball !== null) fs.rmSync(tarball, { force: true });
  console.error(`procwire: refusing the package: ${problems.join('; ')}. ` +
    'Pack again (scripts/prebuild.sh builds every addon); a partial set must be asked for with ' +
    'PROCWIRE_PREBUILD_NODES / PROCWIRE_PREBUILD_ARCHS.');
  process.exitCode = 1;
}

main();
