'use strict';
// Every runtime export is reachable the same way from CommonJS, from ESM by
// name, and in index.d.ts: one list, three places, kept equal here.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');

const root = path.join(__dirname, '..');

// Names index.d.ts declares as values (not types): `export declare const|function|class`.
function declaredRuntimeNames() {
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8');
  const names = new Set();
  for (const m of dts.matchAll(/^export\s+declare\s+(?:const|let|function|class|abstract\s+class)\s+([A-Za-z_$][\w$]*)/gm)) {
    names.add(m[1]);
  }
  return [...names].sort();
}

function esmNames() {
  // A fresh process, so the ESM entry is evaluated exactly as a user's import would.
  const out = execFileSync(process.execPath, ['--input-type=module', '-e',
    `import * as m from ${JSON.stringify(path.join(root, 'index.mjs'))};` +
    'process.stdout.write(JSON.stringify(Object.keys(m)));'], { encoding: 'utf8', timeout: 30_000 });
  return JSON.parse(out).filter((n) => n !== 'default').sort();
}

test('CommonJS exports, ESM named exports and index.d.ts values are the same names', () => {
  const cjs = Object.keys(require(root)).sort();
  // The one exception: reading `cluster` loads Node's cluster module, so the
  // ESM entry offers it as getCluster() only (both exist in CommonJS).
  assert.deepStrictEqual(esmNames(), cjs.filter((n) => n !== 'cluster'),
    'index.mjs named exports differ from require("procwire")');
  assert.deepStrictEqual(declaredRuntimeNames(), cjs, 'index.d.ts exported values differ from require("procwire")');
});

// index.d.mts (the types of `import ... from 'procwire'`) names what
// index.mjs exports, no more, so a named import that fails at run time
// (`cluster`) fails to type-check too; and it passes on every type index.d.ts
// declares.
test('index.d.mts declares exactly the ESM entry\'s names and every type of index.d.ts', () => {
  const mts = fs.readFileSync(path.join(root, 'index.d.mts'), 'utf8');
  const blocks = [...mts.matchAll(/^export (type )?\{([^}]*)\} from '\.\/index\.js';/gm)];
  const names = (b) => b[2].split(',').map((n) => n.trim()).filter(Boolean).sort();
  assert.deepStrictEqual(names(blocks.find((b) => !b[1])), esmNames(), 'index.d.mts values differ from index.mjs');
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8');
  const types = [...dts.matchAll(/^export (?:interface|type) ([A-Za-z_]\w*)/gm)].map((m) => m[1]).sort();
  assert.deepStrictEqual(names(blocks.find((b) => b[1])), types, 'index.d.mts types differ from index.d.ts');
});

test('ESM named imports are the CommonJS objects themselves', () => {
  const script = `
    import { createRequire } from 'node:module';
    import * as m from ${JSON.stringify(path.join(root, 'index.mjs'))};
    import dflt, { alloc, parent, getParent, codec } from ${JSON.stringify(path.join(root, 'index.mjs'))};
    const cjs = createRequire(import.meta.url)(${JSON.stringify(root)});
    const same = Object.keys(cjs).filter((k) => k !== 'parent' && k !== 'cluster').every((k) => m[k] === cjs[k]);
    const buf = alloc(16);
    process.stdout.write(JSON.stringify({ same, dflt: dflt === cjs, parent, getParent: getParent(),
      codec: codec === cjs.codec, alloc: Buffer.isBuffer(buf) && buf.length === 16 }));`;
  const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script],
    { encoding: 'utf8', timeout: 30_000 }));
  assert.deepStrictEqual(out, { same: true, dflt: true, parent: null, getParent: null, codec: true, alloc: true });
});

test('the ESM parent is the procwire child channel when forked as one', { timeout: 30_000 }, async (t) => {
  const procwire = require(root);
  const dir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'procwire-exports-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const child = path.join(dir, 'child.mjs');
  fs.writeFileSync(child, `import { parent, getParent } from ${JSON.stringify(path.join(root, 'index.mjs'))};
parent.respond((v) => ({ doubled: v * 2, same: parent === getParent() }));
`);
  const cp = procwire.fork(child, { child: 'procwire' });
  t.after(() => cp.kill('SIGKILL'));
  assert.deepStrictEqual(await cp.request(21, { timeout: 10_000 }), { doubled: 42, same: true });
  cp.disconnect();
});
