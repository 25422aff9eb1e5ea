'use strict';
// The start bundles compile lib/'s sources with their comment-only lines
// emptied (scripts/build-start-bundle.js, withoutCommentLines). Its scan of
// strings, template literals, regular expressions and comments is held here
// to a real parser's (acorn's): every lib/ file, and sources made to trip
// it, must lose exactly the lines that hold nothing but a // comment, and
// keep their line count.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const acorn = require('acorn');
const { withoutCommentLines } = require('../scripts/build-start-bundle');

const ROOT = path.join(__dirname, '..');

// The 0-based numbers of the lines that hold only a // comment, by acorn.
function commentOnlyLines(source) {
  const lines = new Set();
  const lineStarts = [0];
  for (let i = 0; i < source.length; i++) if (source[i] === '\n') lineStarts.push(i + 1);
  acorn.parse(source, {
    ecmaVersion: 'latest', sourceType: 'script', allowHashBang: true, allowReturnOutsideFunction: true,
    onComment(block, text, start) {
      if (block) return;
      let line = 0;
      while (line + 1 < lineStarts.length && lineStarts[line + 1] <= start) line++;
      if (/^[ \t]*$/.test(source.slice(lineStarts[line], start))) lines.add(line);
    },
  });
  return lines;
}

function check(source, what) {
  const out = withoutCommentLines(source, what).split('\n');
  const before = source.split('\n');
  assert.strictEqual(out.length, before.length, `${what}: line count`);
  const expected = commentOnlyLines(source);
  for (let n = 0; n < before.length; n++) {
    const emptied = out[n] !== before[n];
    assert.strictEqual(emptied, expected.has(n), `${what}:${n + 1}: ${JSON.stringify(before[n])}`);
    if (emptied) assert.strictEqual(out[n], '', `${what}:${n + 1}`);
  }
}

test('every lib/ file loses exactly its comment-only lines', () => {
  const files = [];
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.js')) files.push(full);
    }
  };
  walk(path.join(ROOT, 'lib'));
  assert.ok(files.length > 50, `${files.length} files`);
  for (const file of files) check(fs.readFileSync(file, 'utf8'), path.relative(ROOT, file));
});

test('literals that hold // lines keep them; code after them still loses its comments', () => {
  const sources = {
    template: 'const a = `\n// kept: inside a template\n${ { b: `\n// kept: nested\n` }.b }\n// kept too\n`;\n// gone\n',
    regexp: 'const r = /\\/\\/ not a comment/;\nconst s = x / 2 / 3;\n// gone\nconst t = [/`/, /"/];\n// gone as well\n',
    strings: "const q = '\\' //';\nconst d = \"//\";\n  // gone\nconst e = `${'`'}`;\n// gone\n",
    block: '/*\n// kept: inside a block comment\n*/\n// gone\nconst f = 1; // a trailing comment stays\n',
    keywords: 'function g(x) {\n  return /a\\/b/.test(x) ? typeof /c/ : x in /d/;\n}\n// gone\n',
  };
  for (const [what, source] of Object.entries(sources)) check(source, what);
  // A regular expression right after `)` reads as a division to the scan;
  // when that leaves it inside a literal at the end, the build stops
  // rather than guess (and the test above holds lib/ to acorn's reading).
  assert.throws(() => withoutCommentLines('if (x) /`/.test(y);\n// c\n', 'paren'), /ended inside a `/);
});
