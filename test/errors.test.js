'use strict';
// The error table: every code has its own class, every class is a
// ProcwireError and keeps the built-in base that fits (test/types.test.js
// checks that index.d.ts pins the same codes).
const test = require('node:test');
const assert = require('node:assert');
const errors = require('../lib/errors');

test('every code makes an error of its own class, branded ProcwireError', () => {
  for (const [code, [name, Base]] of Object.entries(errors.CODES)) {
    const err = errors.makeError(code, 'm');
    assert.strictEqual(err.code, code);
    assert.strictEqual(err.name, name);
    assert.strictEqual(err.message, 'm');
    assert.ok(err instanceof errors.classes[name], `${code} is a ${name}`);
    assert.ok(err instanceof Base, `${code} keeps its ${Base.name} base`);
    assert.ok(err instanceof errors.ProcwireError, `${code} is a ProcwireError`);
    assert.strictEqual(errors.classes[name].code, code);
  }
});

test('foreign errors and look-alikes are not ProcwireErrors', () => {
  assert.strictEqual(new Error('x') instanceof errors.ProcwireError, false);
  assert.strictEqual(Object.assign(new TypeError('x'), { code: 'ERR_PROCWIRE_INVALID_ARG' }) instanceof
    errors.ProcwireError, false);
  assert.strictEqual(null instanceof errors.ProcwireError, false);
  assert.strictEqual(new errors.ProcwireError('x') instanceof errors.ProcwireError, true);
});

test('unknown codes are a programming error, not a silent fallback', () => {
  assert.throws(() => errors.makeError('ERR_PROCWIRE_NOPE', 'x'), /unknown error code/);
});
