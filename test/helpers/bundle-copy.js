'use strict';
// A scratch copy of lib/ and of build/'s start bundles and manifests, for
// tests that edit files or change modes and must leave this checkout's own
// bundles as they are. Removed when the test ends.

const fs = require('fs');
const os = require('os');
const path = require('path');
const startBundle = require('../../lib/start-bundle');

function copyLibAndBundles(t, prefix) {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(copy, { recursive: true, force: true }));
  fs.cpSync(path.join(__dirname, '..', '..', 'lib'), path.join(copy, 'lib'), { recursive: true });
  fs.mkdirSync(path.join(copy, 'build'));
  for (const name of ['child-start', 'parent-start']) {
    const { bundle, manifest } = startBundle.bundleFiles(name);
    for (const f of [bundle, manifest]) fs.copyFileSync(f, path.join(copy, 'build', path.basename(f)));
  }
  return copy;
}

module.exports = { copyLibAndBundles };
