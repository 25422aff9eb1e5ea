'use strict';
// The start bundles' stamp (lib/start-bundle.js): once a check has read the
// bundled files and found both bundles current, and the files are older
// than the check by a margin, a stamp records what stat() said of each, and
// later processes stat() the files rather than read them. It must never let
// a changed file through: an edit that keeps the size, and puts the
// modification time back, still makes both bundles not current. Run on a
// copy of lib/ and build/'s bundles, so this checkout's stay as they are.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const fs = require('fs');
const path = require('path');
const startBundle = require('../lib/start-bundle');
const { copyLibAndBundles } = require('./helpers/bundle-copy');

// How much older than the check the files must be for a stamp (the
// module's STAMP_AGE_MS, 2 s), with room for a coarse clock.
const AGE_WAIT_MS = 2300;

function copyTree(t) {
  return copyLibAndBundles(t, 'procwire-stamp-');
}

// In a fresh process, the copy's own lib/start-bundle.js: whether each
// bundle is current, and how many files under the copy's lib/ the check
// read (lib/start-bundle.js itself, which require() reads, not counted).
// spawn: more options for the process (uid and gid, to run as another user).
// fresh: the process first gives every file of the copy a change time of
// now (utimes() with the times it has), so the files are too young for a
// stamp however long the process took to start.
function check(copy, flags = [], spawn = {}, fresh = false) {
  const lib = path.join(copy, 'lib') + path.sep;
  const script = `
    const fs = require('fs');
    if (${fresh}) {
      for (const dir of ['lib', 'build']) {
        for (const name of fs.readdirSync(${JSON.stringify(copy)} + '/' + dir, { recursive: true })) {
          const file = ${JSON.stringify(copy)} + '/' + dir + '/' + name;
          const st = fs.statSync(file);
          fs.utimesSync(file, st.atime, st.mtime);
        }
      }
    }
    const read = [];
    const readFileSync = fs.readFileSync;
    fs.readFileSync = function (file, ...rest) {
      if (typeof file === 'string' && file.startsWith(${JSON.stringify(lib)}) && file !== ${JSON.stringify(path.join(lib, 'start-bundle.js'))}) read.push(file);
      return readFileSync.call(this, file, ...rest);
    };
    const s = require(${JSON.stringify(path.join(lib, 'start-bundle.js'))});
    const current = ['child-start', 'parent-start'].map((name) => s.currentBundle(name) !== null);
    console.log(JSON.stringify({ current, read: read.length }));`;
  return JSON.parse(childProcess.execFileSync(process.execPath, [...flags, '-e', script],
    { encoding: 'utf8', env: { ...process.env, PROCWIRE_START_BUNDLE: 'build' }, timeout: 30_000, ...spawn }));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

test('a stamp spares later processes reading the files, and an edit that keeps size and time is still seen', { timeout: 60_000 }, async (t) => {
  if (startBundle.currentBundle() === null || startBundle.currentBundle('parent-start') === null) {
    t.skip('no current start bundles (npm run build makes them)');
    return;
  }
  const copy = copyTree(t);
  const stamp = path.join(copy, 'build', startBundle.STAMP);
  // A whole second, which utimes() can put back exactly (npm gives every
  // file it unpacks such a fixed time).
  const errors = path.join(copy, 'lib', 'errors.js');
  fs.utimesSync(errors, 499162500, 499162500);
  // Just changed: the files are too young for a stamp, so each process
  // reads them. Changed by the checking process itself, right before its
  // check: a copy made more than the margin before it (a slow start on a
  // loaded machine) would be old enough.
  let seen = check(copy, [], {}, true);
  assert.deepStrictEqual(seen.current, [true, true]);
  assert.ok(seen.read > 30, `the check read ${seen.read} files`);
  assert.strictEqual(fs.existsSync(stamp), false, 'no stamp for files younger than the margin');

  await sleep(AGE_WAIT_MS);
  // A process the permission model lets only read writes no stamp, and
  // fails nothing for it.
  const permission = process.allowedNodeEnvironmentFlags.has('--permission') ? '--permission' : '--experimental-permission';
  seen = check(copy, [permission, '--allow-fs-read=*']);
  assert.deepStrictEqual(seen.current, [true, true]);
  assert.strictEqual(fs.existsSync(stamp), false, 'a process that may not write wrote no stamp');
  seen = check(copy);
  assert.deepStrictEqual(seen.current, [true, true]);
  assert.ok(fs.existsSync(stamp), 'the check of old enough files wrote a stamp');
  seen = check(copy);
  assert.deepStrictEqual(seen, { current: [true, true], read: 0 }, 'a stamped place is checked without reading lib/');

  // A patched constant: same size, and the modification time put back.
  const before = fs.statSync(errors);
  const text = fs.readFileSync(errors, 'latin1');
  const at = text.indexOf('// ');
  fs.writeFileSync(errors, `${text.slice(0, at)}//-${text.slice(at + 3)}`, 'latin1');
  fs.utimesSync(errors, 499162500, 499162500);
  const after = fs.statSync(errors);
  assert.strictEqual(after.size, before.size);
  assert.strictEqual(after.mtimeMs, before.mtimeMs);
  assert.deepStrictEqual(check(copy).current, [false, false], 'lib/errors.js changed, its size and time kept');
  // Put back as it was, the file is current again (by its contents: the
  // stamp names the file as it was before the edit).
  fs.writeFileSync(errors, text, 'latin1');
  assert.deepStrictEqual(check(copy).current, [true, true], 'lib/errors.js as it was');

  // A rebuilt bundle (another inode) is checked by contents again.
  const bundle = path.join(copy, 'build', 'child-start-bundle.js');
  fs.copyFileSync(bundle, `${bundle}.new`);
  fs.renameSync(`${bundle}.new`, bundle);
  seen = check(copy);
  assert.deepStrictEqual(seen.current, [true, true]);
  assert.ok(seen.read > 30, 'a bundle replaced after the stamp has its files read');
});

test('a stamp that cannot be read or written costs the check nothing but time', { timeout: 60_000 }, (t) => {
  if (startBundle.currentBundle() === null || startBundle.currentBundle('parent-start') === null) {
    t.skip('no current start bundles (npm run build makes them)');
    return;
  }
  const copy = copyTree(t);
  const stamp = path.join(copy, 'build', startBundle.STAMP);
  // Not JSON, then not a file at all: each process checks the contents.
  fs.writeFileSync(stamp, '{ not json');
  assert.deepStrictEqual(check(copy).current, [true, true]);
  fs.rmSync(stamp);
  fs.mkdirSync(stamp);
  assert.deepStrictEqual(check(copy).current, [true, true]);
  // An old stamp's file list, naming a file that is gone, is not trusted.
  fs.rmSync(stamp, { recursive: true });
  fs.writeFileSync(stamp, JSON.stringify({ files: { 'lib/gone.js': [1, 1, 1, 1, 1] } }));
  const seen = check(copy);
  assert.deepStrictEqual(seen.current, [true, true]);
  assert.ok(seen.read > 30, 'a stamp that does not fit has the files read');
  assert.deepStrictEqual(fs.readdirSync(path.join(copy, 'build')).filter((f) => f.endsWith('.tmp')), [], 'no half-written stamp is left');
});

test('a file the check may not stat() makes the bundles not current, and fails nothing', { timeout: 60_000 }, (t) => {
  if (startBundle.currentBundle() === null || startBundle.currentBundle('parent-start') === null) {
    t.skip('no current start bundles (npm run build makes them)');
    return;
  }
  const copy = copyTree(t);
  const build = path.join(copy, 'build');
  const stamp = path.join(build, startBundle.STAMP);
  // A damaged stamp that names a file no stat() takes (a NUL byte in it).
  fs.writeFileSync(stamp, JSON.stringify({ files: { 'lib/errors\u0000.js': [1, 1, 1, 1, 1] } }));
  let seen = check(copy);
  assert.deepStrictEqual(seen.current, [true, true]);
  assert.ok(seen.read > 30, 'a stamp that names no file has the files read');
  fs.rmSync(stamp);
  // build/ made by another user with a umask of 077 (`sudo npm run build`):
  // its files cannot be stat()ed. Root may stat anything, so as root the
  // check runs as nobody, in a copy nobody may read (but for build/).
  const asOther = process.getuid() === 0 ? { uid: 65534, gid: 65534, cwd: copy } : null;
  fs.chmodSync(copy, 0o755);
  for (const entry of fs.readdirSync(path.join(copy, 'lib'), { recursive: true })) {
    const file = path.join(copy, 'lib', entry);
    fs.chmodSync(file, fs.statSync(file).isDirectory() ? 0o755 : 0o644);
  }
  fs.chmodSync(build, asOther === null ? 0o600 : 0o700);
  try {
    seen = check(copy, [], asOther ?? {});
  } catch (err) {
    // A container without the right to change user (EPERM), or a Node
    // binary that user may not run (EACCES: a checkout under a private
    // directory): the spawn itself failed, and nothing was checked.
    if (err.code !== 'EPERM' && err.code !== 'EACCES') throw err;
    t.diagnostic(`cannot run the check as another user (${err.code})`);
    return;
  } finally {
    // Put back before the copy is removed.
    fs.chmodSync(build, 0o755);
  }
  assert.deepStrictEqual(seen.current, [false, false]);
});
