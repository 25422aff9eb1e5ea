'use strict';
// docs/api.md is checked against the type declarations, both ways: every
// name each entry point's .d.ts exports, every member of its classes,
// interfaces and object constants, and every event its classes declare
// (their `on(event: '...')` overloads) is in the reference; and the
// reference names nothing the declarations lack. The declarations are read
// with the TypeScript compiler's own parser (typescript's API), not with
// regular expressions.
//
// The reference's shape, which this test reads:
//   ## `procwire`, ## `procwire/pool`, ...   one section per entry point;
//   ### `Name...`                             one per declaration the entry
//                                             point declares itself;
//   - `member...`                             one bullet per member, its name
//                                             first (`static name(...)` and
//                                             `new Name(...)` for the
//                                             constructor); `'event'` for an
//                                             event.
// Names an entry point re-exports from another appear in its section as
// code (`Pool`), and its default export as `default`.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const url = require('url');

const root = path.join(__dirname, '..');
const ENTRY_POINTS = [
  { module: 'procwire', file: 'index.d.ts' },
  { module: 'procwire/pool', file: 'pool.d.ts' },
  { module: 'procwire/register', file: 'register.d.ts' },
  { module: 'procwire/vitest', file: 'vitest.d.ts' },
];

// TypeScript 7's API (typescript/unstable/sync: the compiler's own parser,
// reached through its native binary) from the copy scripts/setup-types.sh
// installs for test/types.test.js, or the tree's devDependency.
function typescriptDir() {
  for (const from of [path.join(root, '.test-deps', 'types', 'typescript'), root]) {
    try {
      return path.dirname(require.resolve('typescript/package.json', { paths: [from] }));
    } catch { /* not there */ }
  }
  return null;
}

async function loadTypescript(dir) {
  const load = (sub) => import(url.pathToFileURL(path.join(dir, sub)).href);
  const { API } = await load('dist/api/sync/api.js');
  const { SyntaxKind } = await load('dist/ast/index.js');
  return { API, SyntaxKind };
}

// A project holding only the four declaration files, so the compiler parses
// them as the package ships them.
function parseDeclarations(t, ts) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-api-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const config = path.join(dir, 'tsconfig.json');
  fs.writeFileSync(config, JSON.stringify({
    compilerOptions: { noEmit: true, types: [], module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022' },
    files: ENTRY_POINTS.map((e) => path.join(root, e.file)),
  }));
  const api = new ts.API({ cwd: dir });
  try {
    const project = api.updateSnapshot({ openProject: config }).getProject(config);
    return ENTRY_POINTS.map((e) => ({ ...e, decls: declarationsOf(ts.SyntaxKind, project.program.getSourceFile(path.join(root, e.file))) }));
  } finally {
    api.close();
  }
}

function hasModifier(SK, node, kind) {
  return Boolean(node.modifiers && node.modifiers.some((m) => m.kind === kind));
}

// The name of a member or declaration as written (identifier or string).
function nameOf(node) {
  return node.name && typeof node.name.text === 'string' ? node.name.text : undefined;
}

// A class's or interface's documented parts: members by name (a public
// constructor as 'constructor'; private ones and `on` left out) and the
// events its `on(event: 'a' | 'b', ...)` overloads name.
function membersOf(SK, members) {
  const names = new Set();
  const events = new Set();
  for (const m of members) {
    if (hasModifier(SK, m, SK.PrivateKeyword)) continue;
    if (m.kind === SK.Constructor) {
      names.add('constructor');
      continue;
    }
    const name = nameOf(m);
    if (name === undefined) continue;  // index and call signatures
    if (name === 'on' && (m.kind === SK.MethodDeclaration || m.kind === SK.MethodSignature)) {
      const first = m.parameters[0] && m.parameters[0].type;
      const literals = first && first.kind === SK.UnionType ? first.types : [first];
      for (const lit of literals) {
        if (lit && lit.kind === SK.LiteralType && lit.literal.kind === SK.StringLiteral) events.add(lit.literal.text);
      }
      continue;
    }
    names.add(name);
  }
  return { members: names, events };
}

// Every declaration a file exports: { name -> { members, events, reexport } }.
function declarationsOf(SK, sf) {
  const decls = new Map();
  const add = (name, parts = { members: new Set(), events: new Set() }, extra = {}) =>
    decls.set(name, { ...parts, ...extra });
  for (const st of sf.statements) {
    const exported = hasModifier(SK, st, SK.ExportKeyword);
    if (st.kind === SK.ExportDeclaration) {
      for (const el of st.exportClause ? st.exportClause.elements : []) add(el.name.text, undefined, { reexport: true });
    } else if (st.kind === SK.ExportAssignment) {
      add('default', undefined, { reexport: true });
    } else if (st.kind === SK.ModuleDeclaration) {
      // `declare module 'child_process' { interface ForkOptions ... }`: an
      // augmentation of Node's types, documented as such.
      for (const inner of st.body.statements) {
        if (inner.kind === SK.InterfaceDeclaration) add(nameOf(inner), membersOf(SK, inner.members));
      }
    } else if (!exported) {
      continue;
    } else if (st.kind === SK.ClassDeclaration || st.kind === SK.InterfaceDeclaration) {
      add(nameOf(st), membersOf(SK, st.members));
    } else if (st.kind === SK.FunctionDeclaration || st.kind === SK.TypeAliasDeclaration) {
      add(nameOf(st));
    } else if (st.kind === SK.VariableStatement) {
      for (const d of st.declarationList.declarations) {
        add(nameOf(d), d.type && d.type.kind === SK.TypeLiteral ? membersOf(SK, d.type.members) : undefined);
      }
    }
  }
  return decls;
}

// docs/api.md as { module -> { codes: Set, decls: Map(name -> { line, members: [{ name, line }], events }) } }.
function readReference(text) {
  const sections = new Map();
  let section = null;
  let decl = null;
  text.split('\n').forEach((line, i) => {
    const where = i + 1;
    let m;
    if ((m = /^## `([^`]+)`/.exec(line))) {
      section = { codes: new Set(), decls: new Map(), line: where };
      sections.set(m[1], section);
      decl = null;
      return;
    }
    if (/^## /.test(line)) {
      section = null;
      decl = null;
      return;
    }
    if (section === null) return;
    for (const code of line.matchAll(/`([^`]+)`/g)) section.codes.add(code[1]);
    if ((m = /^### `(?:new )?([A-Za-z_$][\w$]*)/.exec(line))) {
      decl = { line: where, members: [], events: [] };
      assert.ok(!section.decls.has(m[1]), `docs/api.md:${where}: ${m[1]} has two sections`);
      section.decls.set(m[1], decl);
      return;
    }
    if (decl === null || !line.startsWith('- `')) return;
    const first = /^- `([^`]+)`/.exec(line)[1];
    if ((m = /^'([^']+)'$/.exec(first))) {
      decl.events.push({ name: m[1], line: where });
    } else if (/^new /.test(first)) {
      decl.members.push({ name: 'constructor', line: where });
    } else if ((m = /^(?:static )?([A-Za-z_$][\w$]*)/.exec(first))) {
      decl.members.push({ name: m[1], line: where });
    }
  });
  return sections;
}

test('docs/api.md documents every export, member and event of the .d.ts files, and nothing else', async (t) => {
  const dir = typescriptDir();
  if (dir === null) {
    t.skip('typescript is not installed: run `npm install` (devDependency) or scripts/setup-types.sh');
    return;
  }
  const ts = await loadTypescript(dir);
  const entries = parseDeclarations(t, ts);
  const reference = readReference(fs.readFileSync(path.join(root, 'docs', 'api.md'), 'utf8'));
  const missing = [];
  const extra = [];
  let checked = 0;
  for (const { module, file, decls } of entries) {
    assert.ok(decls.size > 0, `${file}: the parser found no exports`);
    const section = reference.get(module);
    if (section === undefined) {
      missing.push(`a section ## \`${module}\``);
      continue;
    }
    for (const [name, d] of decls) {
      checked++;
      if (d.reexport) {
        if (!section.codes.has(name)) missing.push(`${module}: \`${name}\` (exported by ${file})`);
        continue;
      }
      const doc = section.decls.get(name);
      if (doc === undefined) {
        missing.push(`${module}: ### \`${name}\``);
        continue;
      }
      const members = new Set(doc.members.map((x) => x.name));
      const events = new Set(doc.events.map((x) => x.name));
      for (const m of d.members) if (!members.has(m)) missing.push(`${module}: ${name}: - \`${m}\``);
      for (const e of d.events) if (!events.has(e)) missing.push(`${module}: ${name}: - \`'${e}'\``);
      for (const x of doc.members) if (!d.members.has(x.name)) extra.push(`docs/api.md:${x.line}: ${name} has no member ${x.name} in ${file}`);
      for (const x of doc.events) if (!d.events.has(x.name)) extra.push(`docs/api.md:${x.line}: ${name} has no event '${x.name}' in ${file}`);
      checked += d.members.size + d.events.size;
    }
    for (const [name, doc] of section.decls) {
      if (!decls.has(name) || decls.get(name).reexport) extra.push(`docs/api.md:${doc.line}: ${file} declares no ${name}`);
    }
  }
  for (const module of reference.keys()) {
    if (!entries.some((e) => e.module === module)) extra.push(`docs/api.md: ## \`${module}\` is not an entry point with a .d.ts`);
  }
  assert.deepStrictEqual(missing, [], `missing from docs/api.md:\n  ${missing.join('\n  ')}`);
  assert.deepStrictEqual(extra, [], `docs/api.md names what the .d.ts files lack:\n  ${extra.join('\n  ')}`);
  // The four files declare a few hundred names; a parse that found only a
  // handful would pass the checks above vacuously.
  assert.ok(checked > 200, `only ${checked} names checked`);
});

test('the API reference is linked from README.md and docs/guide.md', () => {
  for (const [file, link] of [['README.md', 'docs/api.md'], [path.join('docs', 'guide.md'), 'api.md']]) {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    assert.ok(text.includes(`](${link})`) || text.includes(`](${link}#`), `${file} does not link ${link}`);
  }
});

test('no tracker numbers in README.md or docs/', () => {
  const found = [];
  for (const file of ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]) {
    fs.readFileSync(path.join(root, file), 'utf8').split('\n').forEach((line, i) => {
      // "#31", "issue 29", "issues 12 and 13", "PR 7"; not a URL's fragment
      // or a Markdown heading.
      const bare = line.replace(/\]\([^)]*\)/g, '](…)');
      if (/(^|[\s(])#\d+\b/.test(bare) || /\b(issues?|PRs?|pull requests?)\s+#?\d+/i.test(bare)) found.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.deepStrictEqual(found, []);
});
