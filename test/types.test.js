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

function packageDir(name, from = root) {
  return path.dirname(require.resolve(`${name}/package.json`, { paths: [from] }));
}

// The toolchains: the latest typescript and @types/node of every supported
// Node major and the newest, each in its own cached prefix under
// .test-deps/types/ that scripts/setup-types.sh installs once (a few seconds
// cold, nothing warm). Checking one @types/node only hid that index.d.ts did
// not compile against the newer ones.
const TYPES_DIR = path.join(root, '.test-deps', 'types');
function toolchains() {
  execFileSync('bash', [path.join(root, 'scripts', 'setup-types.sh')], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 300_000 });
  const majors = fs.readdirSync(TYPES_DIR).filter((d) => /^node-\d+$/.test(d)).sort();
  assert.ok(majors.length >= 5, `@types/node majors in ${TYPES_DIR}: ${majors}`);
  return majors.map((d) => ({ name: d, dir: path.join(TYPES_DIR, d) }));
}

// A project as a TypeScript user has it: node_modules/procwire (what the
// package ships for types) and @types/node with its one dependency.
function makeProject(t, files, types, options = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-types-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const pkg = path.join(dir, 'node_modules', 'procwire');
  fs.mkdirSync(pkg, { recursive: true });
  for (const f of ['package.json', 'index.d.ts', 'index.d.mts', 'pool.d.ts']) fs.copyFileSync(path.join(root, f), path.join(pkg, f));
  fs.mkdirSync(path.join(dir, 'node_modules', '@types'));
  const nodeTypes = packageDir('@types/node', types.dir);
  fs.symlinkSync(nodeTypes, path.join(dir, 'node_modules', '@types', 'node'));
  fs.symlinkSync(packageDir('undici-types', nodeTypes), path.join(dir, 'node_modules', 'undici-types'));
  fs.writeFileSync(path.join(dir, 'package.json'), '{"private": true}\n');
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true, noEmit: true, target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext',
      types: [], skipLibCheck: false, noUnusedLocals: false, ...options,
    },
    files,
  }, null, 2));
  for (const f of files) {
    const src = path.join(__dirname, 'types', f);
    if (fs.existsSync(src)) fs.copyFileSync(src, path.join(dir, f));
  }
  return dir;
}

function tsc(dir) {
  const bin = path.join(packageDir('typescript', path.join(TYPES_DIR, 'typescript')), 'bin', 'tsc');
  try {
    execFileSync(process.execPath, [bin, '-p', dir], { cwd: dir, stdio: 'pipe', timeout: 120_000 });
    return '';
  } catch (err) {
    return `${err.stdout}${err.stderr}` || String(err);
  }
}

test('usage files (CommonJS and ESM) type-check under --strict against every @types/node major',
  { timeout: 300_000 }, async (t) => {
    for (const types of toolchains()) {
      await t.test(types.name, (st) => {
        const dir = makeProject(st, ['usage.ts', 'usage.mts', 'first-hour.ts'], types);
        assert.strictEqual(tsc(dir), '');
      });
    }
  });

test('wrong usages are type errors', { timeout: 180_000 }, (t) => {
  // Every line of wrong.ts carries @ts-expect-error: it compiles only if each
  // one is an error. A line that type-checks would be reported as an unused
  // directive (TS2578).
  const [, , , , newest] = toolchains();
  const dir = makeProject(t, ['wrong.ts', 'wrong.mts'], newest);
  assert.strictEqual(tsc(dir), '');
  let count = 0;
  for (const f of ['wrong.ts', 'wrong.mts']) {
    count += fs.readFileSync(path.join(__dirname, 'types', f), 'utf8').match(/@ts-expect-error/g).length;
  }
  assert.ok(count >= 10, 'wrong.ts keeps a dozen wrong usages');
  // And the check itself can fail: without the directives the files do not compile.
  const bare = makeProject(t, ['wrong.ts', 'wrong.mts'], newest);
  for (const f of ['wrong.ts', 'wrong.mts']) {
    fs.writeFileSync(path.join(bare, f), fs.readFileSync(path.join(bare, f), 'utf8').replace(/\/\/ @ts-expect-error.*\n/g, ''));
  }
  const out = tsc(bare);
  const errors = out.match(/error TS\d+/g) || [];
  assert.ok(errors.length >= count, `expected ${count} type errors, got:\n${out}`);
});

// Fenced ```js / ```mjs / ```ts blocks of README.md and docs/*.md, as files.
// Blocks that are files other blocks use keep their names; the rest are
// block-<file>-<line>.<ext>.
function docBlocks() {
  const files = ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const out = [];
  for (const file of files) {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    for (const m of text.matchAll(/^```(js|mjs|ts|mts)([^\n]*)\n([\s\S]*?)^```[ \t]*$/gm)) {
      if (/\bfragment\b/.test(m[2])) continue;
      const line = text.slice(0, m.index).split('\n').length;
      const named = /\bfile=(\S+)/.exec(m[2]);
      const name = named ? named[1] : `block-${file.replace(/[/.]/g, '-')}-${line}.${m[1]}`;
      out.push({ where: `${file}:${line}`, name, code: m[3] });
    }
  }
  // And the example programs, under their own names.
  for (const f of fs.readdirSync(path.join(root, 'examples'), { recursive: true })) {
    if (!/\.(js|mjs)$/.test(f)) continue;
    out.push({ where: `examples/${f}`, name: `examples/${f}`, code: fs.readFileSync(path.join(root, 'examples', f), 'utf8') });
  }
  return out;
}

// Every documented call type-checks against index.d.ts: each block of the
// README and docs is compiled (JavaScript with checkJs, as an editor checks
// it) under --strict, less the null checks plain JavaScript does not write,
// against the newest @types/node. A documented call the
// declarations refuse (`child.send(msg, null, { transfer })`,
// `const { port } = server.address()`) fails here.
test('every js/ts block of README.md and docs/*.md, and every example, type-checks against index.d.ts', { timeout: 180_000 }, (t) => {
  const [, , , , newest] = toolchains();
  const blocks = docBlocks();
  assert.ok(blocks.length >= 15, `found ${blocks.length} blocks`);
  const dir = makeProject(t, blocks.map((b) => b.name), newest, {
    allowJs: true, checkJs: true, noImplicitAny: false, strictNullChecks: false, useUnknownInCatchVariables: false,
  });
  for (const b of blocks) {
    fs.mkdirSync(path.dirname(path.join(dir, b.name)), { recursive: true });
    fs.writeFileSync(path.join(dir, b.name), b.code);
  }
  const out = tsc(dir);
  const located = out.replace(/^(\S+?)\((\d+),\d+\)/gm, (whole, name, line) => {
    const b = blocks.find((x) => x.name === name);
    return b ? `${b.where} +${Number(line)} (${name})` : whole;
  });
  assert.strictEqual(located, '');
});
