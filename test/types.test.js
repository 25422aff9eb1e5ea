'use strict';
// index.d.ts must describe the API: a usage file type-checks against it, and
// every error code lib/errors.js defines appears in the declared union.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { CODES } = require('../lib/errors');

const root = path.join(__dirname, '..');

test('every error code is pinned in index.d.ts', () => {
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8');
  for (const code of Object.keys(CODES)) assert.ok(dts.includes(`'${code}'`), `${code} missing from index.d.ts`);
  const union = dts.slice(dts.indexOf('export type ErrorCode'), dts.indexOf(';', dts.indexOf('export type ErrorCode')));
  const declared = [...union.matchAll(/'(ERR_PROCWIRE_[A-Z_]+)'/g)].map((m) => m[1]);
  assert.deepStrictEqual(declared.sort(), Object.keys(CODES).sort());
});

test('the usage file type-checks against index.d.ts', { timeout: 120_000 }, (t) => {
  let tsc;
  try {
    tsc = require.resolve('typescript/bin/tsc', { paths: [root] });
  } catch {
    assert.fail('typescript is a devDependency: run npm install');
  }
  execFileSync(process.execPath, [tsc, '--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs',
    '--types', 'node', path.join(__dirname, 'types', 'usage.ts')], { cwd: root, stdio: 'pipe' });
});
