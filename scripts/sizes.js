'use strict';
// Measures every class and function in lib/ with a parser (espree, ESLint's,
// so the grammar is the one the linter accepts), and fails when a class is
// over 500 lines or a function over 150 (issue 30's bounds).
// lib/codec/advanced-fast.js is exempt: it mirrors V8's own serializer.
//   node scripts/sizes.js [--all]   --all lists every class and the largest functions
const fs = require('fs');
const path = require('path');
const espree = require('espree');

const root = path.join(__dirname, '..');
const EXEMPT = new Set(['lib/codec/advanced-fast.js']);
const MAX_CLASS = 500;
const MAX_FUNCTION = 150;

function files(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...files(full));
    else if (entry.name.endsWith('.js')) out.push(full);
  }
  return out;
}

function walk(node, visit, parent) {
  if (node === null || typeof node !== 'object') return;
  if (typeof node.type === 'string') visit(node, parent);
  for (const key of Object.keys(node)) {
    const value = node[key];
    if (Array.isArray(value)) for (const v of value) walk(v, visit, node);
    else if (value && typeof value === 'object' && typeof value.type === 'string') walk(value, visit, node);
  }
}

// A function's name: its own, its method's or property's key, or its variable's.
function nameOf(node, parent) {
  if (node.id) return node.id.name;
  if (parent && (parent.type === 'MethodDefinition' || parent.type === 'Property') && parent.key) {
    return parent.key.name || parent.key.value || `[${parent.key.type}]`;
  }
  if (parent && parent.type === 'VariableDeclarator' && parent.id.type === 'Identifier') return parent.id.name;
  return '(anonymous)';
}

const rows = [];
for (const file of files(path.join(root, 'lib'))) {
  const rel = path.relative(root, file);
  const ast = espree.parse(fs.readFileSync(file, 'utf8'), { ecmaVersion: 'latest', sourceType: 'script', loc: true });
  walk(ast, (node, parent) => {
    const lines = node.loc ? node.loc.end.line - node.loc.start.line + 1 : 0;
    if (node.type === 'ClassDeclaration' || node.type === 'ClassExpression') {
      rows.push({ kind: 'class', file: rel, name: node.id ? node.id.name : '(anonymous)', line: node.loc.start.line, lines });
    } else if (node.type === 'FunctionDeclaration' || node.type === 'FunctionExpression' ||
               node.type === 'ArrowFunctionExpression') {
      rows.push({ kind: 'function', file: rel, name: nameOf(node, parent), line: node.loc.start.line, lines });
    }
  });
}

const over = rows.filter((r) => !EXEMPT.has(r.file) &&
  ((r.kind === 'class' && r.lines > MAX_CLASS) || (r.kind === 'function' && r.lines > MAX_FUNCTION)));
if (process.argv.includes('--all')) {
  for (const r of rows.filter((x) => x.kind === 'class').sort((a, b) => b.lines - a.lines)) {
    console.log(`class    ${String(r.lines).padStart(5)}  ${r.file}:${r.line} ${r.name}`);
  }
  for (const r of rows.filter((x) => x.kind === 'function' && !EXEMPT.has(x.file)).sort((a, b) => b.lines - a.lines).slice(0, 10)) {
    console.log(`function ${String(r.lines).padStart(5)}  ${r.file}:${r.line} ${r.name}`);
  }
}
for (const r of over) console.log(`OVER: ${r.kind} ${r.file}:${r.line} ${r.name} ${r.lines} lines`);
console.log(`${rows.length} classes and functions in lib/ measured; ${over.length} over the bounds`);
process.exitCode = over.length > 0 ? 1 : 0;
