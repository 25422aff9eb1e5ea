'use strict';
// Documentation cannot drift from the code: every ```js block of README.md
// and docs/*.md runs (each is a whole program that exits by itself), every
// program in examples/ runs, fragments are few and at least parse, and every
// relative link points at a file that exists and that the package ships.
//
// Block conventions (the word after ```js on the fence line):
//   ```js                  a whole CommonJS program: run, must exit 0 in time
//   ```mjs                 the same as an ES module
//   ```js file=child.js    a file the document's programs use (written, not run)
//   ```js fragment         part of a program: only checked with `node --check`
// In a program, a comment `// → text` states output: `text` must appear in
// what the program prints.
// Programs run in a fresh directory where require('procwire') is this tree.
// Blocks that talk to NATS read process.env.NATS_URL; the test starts a
// private nats-server for them, or skips them (saying why) without one.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const childProcess = require('child_process');
const { spawnGroup, killGroup } = require('./helpers/group');
const { startNatsServer } = require('./helpers/nats-server');

const root = path.join(__dirname, '..');
const pkg = require('../package.json');
const RUN_TIMEOUT = 30_000;
// Each test below takes a few seconds; together their limits stay well
// inside the 600 s scripts/test.sh gives this file.
const DOCS_TIMEOUT = 180_000;
// Fragments are allowed, but few: most blocks must be runnable as written.
const MAX_FRAGMENTS = 12;

function docFiles() {
  const docs = fs.existsSync(path.join(root, 'docs'))
    ? fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)
    : [];
  return ['README.md', ...docs];
}

// Fenced code blocks: { lang, attrs, code, line }.
function blocksOf(text) {
  const out = [];
  const re = /^```([A-Za-z0-9]*)([^\n]*)\n([\s\S]*?)^```[ \t]*$/gm;
  let m;
  while ((m = re.exec(text)) !== null) {
    const attrs = {};
    for (const word of m[2].trim().split(/\s+/).filter(Boolean)) {
      const [k, v] = word.split('=');
      attrs[k] = v === undefined ? true : v;
    }
    out.push({ lang: m[1], attrs, code: m[3], line: text.slice(0, m.index).split('\n').length });
  }
  return out;
}

function jsBlocks(file) {
  return blocksOf(fs.readFileSync(path.join(root, file), 'utf8')).filter((b) => b.lang === 'js' || b.lang === 'mjs');
}

// A directory where `require('procwire')` and `import 'procwire'` are this tree.
function sandbox(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-docs-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(root, path.join(dir, 'node_modules', 'procwire'));
  // nats is an optional peer: programs that use it find the tree's copy.
  const nats = path.dirname(require.resolve('nats/package.json', { paths: [root] }));
  fs.symlinkSync(nats, path.join(dir, 'node_modules', 'nats'));
  fs.writeFileSync(path.join(dir, 'package.json'), '{"private": true}\n');
  return dir;
}

// Runs a program in its own process group, so a hung program and anything it
// started are killed together at the deadline (and, by helpers/group.js,
// when this test process ends or is stopped first).
function run(file, cwd, env) {
  return new Promise((resolve) => {
    const child = spawnGroup(process.execPath, [file], {
      cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    const timer = setTimeout(() => {
      out += `\n[killed after ${RUN_TIMEOUT} ms: the program did not exit by itself]`;
      killGroup(child);
    }, RUN_TIMEOUT);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      // Whatever the program left behind in its group goes too.
      killGroup(child);
      resolve({ code, signal, out });
    });
  });
}

function hasNatsServer() {
  try {
    childProcess.execFileSync('nats-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

// A private nats-server for the programs, stopped when test `t` ends.
async function startNats(t) {
  const server = await startNatsServer();
  t.after(() => server.stop());
  return server.url;
}

const usesNats = (code) => /NATS_URL|nats:\/\//.test(code);

test('every runnable code block of README.md and docs/*.md runs and exits by itself', { timeout: DOCS_TIMEOUT }, async (t) => {
  const natsUrl = hasNatsServer() ? await startNats(t) : null;
  let ran = 0;
  let stated = 0;
  for (const file of docFiles()) {
    const blocks = jsBlocks(file);
    const programs = blocks.filter((b) => !b.attrs.fragment && !b.attrs.file);
    if (programs.length === 0) continue;
    await t.test(file, async (st) => {
      const dir = sandbox(st);
      for (const b of blocks.filter((x) => x.attrs.file)) {
        fs.mkdirSync(path.dirname(path.join(dir, b.attrs.file)), { recursive: true });
        fs.writeFileSync(path.join(dir, b.attrs.file), b.code);
      }
      for (const b of programs) {
        const where = `${file}:${b.line}`;
        if (usesNats(b.code) && natsUrl === null) {
          st.diagnostic(`${where}: skipped, nats-server is not installed (scripts/setup.sh installs it)`);
          continue;
        }
        const name = `block-${b.line}.${b.lang === 'mjs' ? 'mjs' : 'js'}`;
        fs.writeFileSync(path.join(dir, name), b.code);
        const r = await run(name, dir, natsUrl ? { NATS_URL: natsUrl } : {});
        assert.strictEqual(r.code, 0, `${where} exited with ${r.signal || r.code}:\n${r.out}`);
        for (const [, expected] of b.code.matchAll(/\/\/ → (.+)$/gm)) {
          assert.ok(r.out.includes(expected.trim()), `${where}: expected output "${expected.trim()}", got:\n${r.out}`);
          stated++;
        }
        ran++;
      }
    });
  }
  assert.ok(ran >= 10, `only ${ran} runnable blocks: the docs should show whole programs`);
  t.diagnostic(`${ran} programs run, ${stated} stated outputs checked`);
});

test('fragments are few, marked, and parse', { timeout: 60_000 }, (t) => {
  const dir = sandbox(t);
  let fragments = 0;
  let total = 0;
  for (const file of docFiles()) {
    for (const b of jsBlocks(file)) {
      total++;
      if (!b.attrs.fragment) continue;
      fragments++;
      const name = path.join(dir, `fragment-${fragments}.${b.lang === 'mjs' ? 'mjs' : 'js'}`);
      fs.writeFileSync(name, b.code);
      try {
        childProcess.execFileSync(process.execPath, ['--check', name], { stdio: 'pipe', timeout: 30_000 });
      } catch (err) {
        assert.fail(`${file}:${b.line}: fragment does not parse:\n${err.stderr}`);
      }
    }
    // A block in another language that is really JavaScript must not dodge the test.
    // (```ts blocks are TypeScript: test/types.test.js compiles each under --strict.)
    for (const b of blocksOf(fs.readFileSync(path.join(root, file), 'utf8'))) {
      assert.ok(!['javascript', 'node', 'cjs', 'typescript'].includes(b.lang), `${file}:${b.line}: use \`\`\`js or \`\`\`mjs`);
    }
  }
  t.diagnostic(`${fragments} fragments of ${total} js blocks`);
  assert.ok(fragments <= MAX_FRAGMENTS, `${fragments} fragments: at most ${MAX_FRAGMENTS}`);
  assert.ok(fragments * 4 <= total, 'at most a quarter of the blocks may be fragments');
});

test('every example runs and exits by itself', { timeout: DOCS_TIMEOUT }, async (t) => {
  const dir = path.join(root, 'examples');
  const examples = fs.readdirSync(dir).filter((f) => f.endsWith('.js') || f.endsWith('.mjs')).sort();
  assert.ok(examples.length >= 8, 'examples/ holds the main uses');
  for (const name of examples) {
    await t.test(name, async () => {
      const r = await run(path.join(dir, name), root, {});
      assert.strictEqual(r.code, 0, `examples/${name} exited with ${r.signal || r.code}:\n${r.out}`);
      const skipped = /^[\w-]+: skipped: (.*)$/m.exec(r.out);
      if (skipped) t.diagnostic(`examples/${name} skipped: ${skipped[1]}`);
    });
  }
});

// Does the package's `files` list ship this repository path?
function shipped(rel) {
  if (['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md'].includes(rel)) return true;
  return pkg.files.some((entry) => {
    if (entry.endsWith('/')) return rel.startsWith(entry);
    if (entry.includes('*')) {
      const re = new RegExp(`^${entry.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*')}$`);
      return re.test(rel);
    }
    return rel === entry || rel.startsWith(`${entry}/`);
  });
}

test('links point at files that exist, and relative ones at files the package ships', () => {
  const repo = pkg.repository.url.replace(/^git\+/, '').replace(/\.git$/, '');
  const problems = [];
  for (const file of docFiles()) {
    const text = fs.readFileSync(path.join(root, file), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
    for (const m of text.matchAll(/!?\[[^\]]*\]\(([^)\s]+)\)/g)) {
      const target = m[1].split('#')[0];
      if (target === '') continue;
      let rel;
      if (target.startsWith(`${repo}/blob/main/`) || target.startsWith(`${repo}/raw/main/`)) {
        // A link into the repository (charts): the file must exist in the tree.
        rel = target.replace(/^.*?\/(?:blob|raw)\/main\//, '');
        if (!fs.existsSync(path.join(root, rel))) problems.push(`${file}: ${target}: no ${rel} in the repository`);
        continue;
      }
      if (/^[a-z]+:/i.test(target)) continue;  // other sites
      rel = path.relative(root, path.resolve(path.dirname(path.join(root, file)), target));
      if (!fs.existsSync(path.join(root, rel))) problems.push(`${file}: ${target}: no such file`);
      else if (!shipped(rel) && !(fs.statSync(path.join(root, rel)).isDirectory() && shipped(`${rel}/`))) {
        problems.push(`${file}: ${target}: ${rel} is not in the package's files`);
      }
    }
  }
  assert.deepStrictEqual(problems, []);
});

test('docs/errors.md lists every error code with its class, and no other', () => {
  const { CODES } = require('../lib/errors');
  const text = fs.readFileSync(path.join(root, 'docs', 'errors.md'), 'utf8');
  const rows = [...text.matchAll(/^\| `(ERR_[A-Z_]+)` \| `([A-Za-z]+)` \|/gm)].map((m) => [m[1], m[2]]);
  assert.deepStrictEqual(rows.map(([c]) => c).sort(), Object.keys(CODES).sort(), 'the table in docs/errors.md');
  for (const [code, cls] of rows) assert.strictEqual(cls, CODES[code][0], `${code}'s class`);
});

// The CHANGELOG's newest version is the one package.json carries, and user
// docs cite no tracker numbers ("issue 15", "#15"): they say what, not where
// it was discussed.
test('CHANGELOG.md has an entry for package.json\'s version, and docs cite no tracker numbers', () => {
  const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const changelog = fs.readFileSync(path.join(root, 'CHANGELOG.md'), 'utf8');
  const versions = [...changelog.matchAll(/^## (\d+\.\d+\.\d+)/gm)].map((m) => m[1]);
  assert.strictEqual(versions[0], version, 'the newest CHANGELOG version is package.json\'s');
  for (const file of docFiles()) {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    const hit = /(?:^|[\s(])(?:#\d+\b|[Ii]ssue \d+\b)/m.exec(text);
    assert.strictEqual(hit, null, `${file} cites a tracker number: ${hit && hit[0]}`);
  }
});
