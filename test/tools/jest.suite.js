'use strict';
// procwire used in a jest test file, as a user testing code that uses it
// does: jest runs each test file's modules in a context of its own, so what
// procwire throws must be that context's Error (and its error classes
// procwire.errors' own), as any package's errors are. procwire's start
// bundle compiles its files in Node's main context, so it must not be used
// under such a loader (lib/start-bundle.js).

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { toolPath } = require('./helpers');

const JEST = path.join(toolPath('jest'), 'bin', 'jest.js');
const ROOT = path.join(__dirname, '..', '..');

test('in a jest test file, procwire\'s errors are the test\'s Error, thrown and from a child', { timeout: 120_000 }, (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-jest-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "private": true }\n');
  fs.writeFileSync(path.join(dir, 'child.js'), [
    `require(${JSON.stringify(ROOT)}).parent.respond((m) => { throw new Error('refused ' + m); });`,
  ].join('\n'));
  fs.writeFileSync(path.join(dir, 'realm.test.js'), [
    `const procwire = require(${JSON.stringify(ROOT)});`,
    "const path = require('path');",
    "test('errors', async () => {",
    '  let thrown;',
    '  try { procwire.codec.advanced.encode(() => 1); } catch (err) { thrown = err; }',
    '  expect(thrown).toBeInstanceOf(Error);',
    '  expect(thrown).toBeInstanceOf(procwire.errors.ProcwireError);',
    "  expect(thrown.code).toBe('ERR_PROCWIRE_UNSERIALIZABLE');",
    "  const child = procwire.fork(path.join(__dirname, 'child.js'), { child: 'procwire' });",
    '  try {',
    "    const remote = await child.request('x').catch((err) => err);",
    '    expect(remote).toBeInstanceOf(Error);',
    "    expect(remote.code).toBe('ERR_PROCWIRE_REMOTE_ERROR');",
    '  } finally {',
    '    child.kill();',
    '  }',
    '});',
  ].join('\n'));
  const run = childProcess.spawnSync(process.execPath, [JEST, '--ci', '--no-watchman', '--rootDir', dir, '--forceExit'], {
    cwd: dir, encoding: 'utf8', timeout: 100_000,
  });
  assert.strictEqual(run.status, 0, `${run.stdout}\n${run.stderr}`);
  assert.match(run.stderr, /Tests:\s+1 passed, 1 total/);
});
