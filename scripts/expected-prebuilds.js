'use strict';
// The prebuilt addons a package must ship: one per supported Node line and
// CPU, eight by default. PROCWIRE_PREBUILD_NODES / PROCWIRE_PREBUILD_ARCHS
// narrow the set exactly as they narrow what scripts/prebuild.sh builds, so
// a deliberately partial pack (a test's one line) says so by its settings.
// Node lines are named by major; each maps to its module ABI. The start
// bundles and their manifests (scripts/build-start-bundle.js --ship) are
// shipped whatever the set; their code caches are named by V8 versions
// known only to the Node binaries, so that script checks those itself.

const ABI = { 20: '115', 22: '127', 24: '137', 26: '147' };

function expectedPrebuilds(env = process.env) {
  const lines = (env.PROCWIRE_PREBUILD_NODES || '20 22 24 26').split(/\s+/).filter(Boolean);
  const archs = (env.PROCWIRE_PREBUILD_ARCHS || 'x64 arm64').split(/\s+/).filter(Boolean);
  const out = [];
  for (const arch of archs) {
    for (const major of lines) {
      if (ABI[major] === undefined) throw new Error(`expected-prebuilds: unknown Node line ${major}`);
      out.push(`prebuilds/linux-${arch}/procwire.abi${ABI[major]}.node`);
    }
  }
  for (const name of ['child-start', 'parent-start']) out.push(`prebuilds/start/${name}-bundle.js`, `prebuilds/start/${name}.json`);
  return out;
}

module.exports = { expectedPrebuilds, ABI };
