'use strict';
// index.d.ts must describe the API: usage files type-check against it under
// --strict in a project holding only procwire and @types/node (no
// `types` entry, so index.d.ts must pull in Node's types itself), wrong
// usages are type errors, and every error code lib/errors.js defines appears
// in the declared union.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
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

function packageDir(name) {
  return path.dirname(require.resolve(`${name}/package.json`, { paths: [root] }));
}

// A project as a TypeScript user has it: node_modules/procwire (what the
// package ships for types) and @types/node with its one dependency.
function makeProject(t, files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-types-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const pkg = path.join(dir, 'node_modules', 'procwire');
  fs.mkdirSync(pkg, { recursive: true });
  for (const f of ['package.json', 'index.d.ts', 'pool.d.ts']) fs.copyFileSync(path.join(root, f), path.join(pkg, f));
  fs.mkdirSync(path.join(dir, 'node_modules', '@types'));
  fs.symlinkSync(packageDir('@types/node'), path.join(dir, 'node_modules', '@types', 'node'));
  fs.symlinkSync(packageDir('undici-types'), path.join(dir, 'node_modules', 'undici-types'));
  fs.writeFileSync(path.join(dir, 'package.json'), '{"private": true}\n');
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true, noEmit: true, target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext',
      types: [], skipLibCheck: false, noUnusedLocals: false,
    },
    files,
  }, null, 2));
  for (const f of files) fs.copyFileSync(path.join(__dirname, 'types', f), path.join(dir, f));
  return dir;
}

function tsc(dir) {
  let bin;
  try {
    bin = path.join(packageDir('typescript'), 'bin', 'tsc');
  } catch {
    assert.fail('typescript is a devDependency: run npm install');
  }
  try {
    execFileSync(process.execPath, [bin, '-p', dir], { cwd: dir, stdio: 'pipe', timeout: 120_000 });
    return '';
  } catch (err) {
    return `${err.stdout}${err.stderr}` || String(err);
  }
}

test('usage files (CommonJS and ESM) type-check under --strict with only procwire and @types/node',
  { timeout: 180_000 }, (t) => {
    const dir = makeProject(t, ['usage.ts', 'usage.mts']);
    assert.strictEqual(tsc(dir), '');
  });

test('wrong usages are type errors', { timeout: 180_000 }, (t) => {
  // Every line of wrong.ts carries @ts-expect-error: it compiles only if each
  // one is an error. A line that type-checks would be reported as an unused
  // directive (TS2578).
  const dir = makeProject(t, ['wrong.ts']);
  assert.strictEqual(tsc(dir), '');
  const count = fs.readFileSync(path.join(__dirname, 'types', 'wrong.ts'), 'utf8').match(/@ts-expect-error/g).length;
  assert.ok(count >= 10, 'wrong.ts keeps a dozen wrong usages');
  // And the check itself can fail: without the directives the file does not compile.
  const bare = makeProject(t, ['wrong.ts']);
  fs.writeFileSync(path.join(bare, 'wrong.ts'),
    fs.readFileSync(path.join(bare, 'wrong.ts'), 'utf8').replace(/\/\/ @ts-expect-error.*\n/g, ''));
  const out = tsc(bare);
  const errors = out.match(/error TS\d+/g) || [];
  assert.ok(errors.length >= count, `expected ${count} type errors, got:\n${out}`);
});
