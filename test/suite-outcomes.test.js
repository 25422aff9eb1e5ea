'use strict';
// scripts/suite-outcomes.js decides whether a library's own suite passed with
// procwire/register as it did plainly (scripts/library-suites.sh,
// scripts/upstream-suites.sh). These run it on TAP and jest reports written
// here, as those runners print them, and check what it names and how it exits.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');

const SCRIPT = path.join(__dirname, '..', 'scripts', 'suite-outcomes.js');

function compare(format, logs, env = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-outcomes-'));
  try {
    const files = logs.map((text, i) => {
      const file = path.join(dir, `run${i}.log`);
      fs.writeFileSync(file, text);
      return file;
    });
    const result = spawnSync(process.execPath, [SCRIPT, format, 'lib', ...files], {
      encoding: 'utf8',
      env: { ...process.env, SUITE_RETRY: '', ...env },
      timeout: 30_000,
    });
    return { status: result.status, out: result.stdout };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const TAPE_PLAIN = [
  'TAP version 13',
  '# simple',
  'ok 1 pid makes sense 4400 vs 3372',
  'ok 2 result',
  '# timing',
  'ok 3 child has been up before the request (20ms)',
  'not ok 4 child has been up before the request (0ms)',
  '1..4',
  '# tests 4',
  '# pass  3',
  '# fail  1',
].join('\n');

test('a test that passes plainly and fails with the hook is named and fails the check', () => {
  const hooked = TAPE_PLAIN.replace('ok 2 result', 'not ok 2 result');
  const { status, out } = compare('tap', [TAPE_PLAIN, hooked]);
  assert.strictEqual(status, 1);
  assert.match(out, /✖ lib: 'simple › result' passes plainly and fails with procwire\/register/);
  assert.match(out, /lib \(plain\): 3 passed, 1 failed, 0 skipped/);
  assert.match(out, /lib \(register\): 2 passed, 2 failed, 0 skipped/);
});

test('names that differ only in their numbers (pids, milliseconds) are one test', () => {
  const hooked = TAPE_PLAIN.replace('4400 vs 3372', '5123 vs 5001');
  const { status, out } = compare('tap', [TAPE_PLAIN, hooked]);
  assert.strictEqual(status, 0, out);
});

test('a name that also fails plainly is listed, not counted, whatever the hooked run does', () => {
  const hooked = TAPE_PLAIN.replace('ok 3 child has been up', 'not ok 3 child has been up');
  const { status, out } = compare('tap', [TAPE_PLAIN, hooked]);
  assert.strictEqual(status, 0, out);
  assert.match(out, /fails plainly too \(not counted\): timing › child has been up before the request \(0ms\)/);
});

test('a difference asks for a second hooked run, and one that passes there is flaky, not a failure', () => {
  const hooked = TAPE_PLAIN.replace('ok 2 result', 'not ok 2 result');
  assert.strictEqual(compare('tap', [TAPE_PLAIN, hooked], { SUITE_RETRY: '1' }).status, 2);
  const { status, out } = compare('tap', [TAPE_PLAIN, hooked, TAPE_PLAIN]);
  assert.strictEqual(status, 0, out);
  assert.match(out, /failed with the hook once, passed in the second hooked run: simple › result/);
  assert.strictEqual(compare('tap', [TAPE_PLAIN, hooked, hooked]).status, 1);
});

test("mocha's tap reporter and a test missing from the hooked run", () => {
  const plain = 'ok 1 Pool should offload a function\nok 2 Pool should cancel a task\nok 3 Pool skipped # SKIP\n';
  const hooked = 'ok 1 Pool should offload a function\n';
  const { status, out } = compare('tap', [plain, hooked]);
  assert.strictEqual(status, 1);
  assert.match(out, /'Pool should cancel a task' passes plainly/);
  assert.match(out, /lib \(plain\): 2 passed, 0 failed, 1 skipped/);
});

// mocha --parallel prints its plan last, a failure's error and stack indented
// under it, and a pending test with "# SKIP -"; the error lines are not tests.
test('mocha --parallel tap: plan last, indented diagnostics, "# SKIP -"', () => {
  const plain = [
    'ok 1 Pool should offload a function',
    'not ok 2 Pool should invoke a method via a proxy',
    '  The "options" argument must be of type object. Received an instance of Array',
    '  TypeError [ERR_INVALID_ARG_TYPE]: The "options" argument must be of type object.',
    '      at target.send (node:internal/child_process:745:7)',
    'ok 3 Pool should handle crashed workers (2) # SKIP -',
    'ok 4 Pool should terminate a worker',
    '# tests 3',
    '# pass 2',
    '# fail 1',
    '1..4',
  ].join('\n');
  assert.strictEqual(compare('tap', [plain, plain]).status, 0);
  const hooked = plain.replace('ok 4 Pool should terminate', 'not ok 4 Pool should terminate');
  const { status, out } = compare('tap', [plain, hooked]);
  assert.strictEqual(status, 1);
  assert.match(out, /lib \(plain\): 2 passed, 1 failed, 1 skipped/);
  assert.match(out, /fails plainly too \(not counted\): Pool should invoke a method via a proxy/);
  assert.match(out, /'Pool should terminate a worker' passes plainly and fails with procwire\/register/);
});

test('a run in which nothing passed plainly proves nothing and fails', () => {
  const { status, out } = compare('tap', ['Error: Cannot find module tape\n', '']);
  assert.strictEqual(status, 1);
  assert.match(out, /no test passed plainly/);
});

test("jest's --json report, by file and full name", () => {
  const report = (status) =>
    JSON.stringify({
      testResults: [
        {
          name: '/w/src/__tests__/a.test.ts',
          status: 'passed',
          assertionResults: [{ fullName: 'ProcessWorker recycles', status }],
        },
        { name: '/w/src/b/__tests__/b.test.ts', status: 'passed', assertionResults: [{ fullName: 'queue', status: 'passed' }] },
      ],
    });
  assert.strictEqual(compare('jest', [report('passed'), report('passed')]).status, 0);
  const { status, out } = compare('jest', [report('passed'), report('failed')]);
  assert.strictEqual(status, 1);
  assert.match(out, /'__tests__\/a\.test\.ts › ProcessWorker recycles' passes plainly/);
});

test('SUITE_NOT_COMPARED names tests that are reported but do not fail the check', () => {
  const hooked = TAPE_PLAIN.replace('ok 1 pid makes sense', 'not ok 1 pid makes sense');
  assert.strictEqual(compare('tap', [TAPE_PLAIN, hooked]).status, 1);
  const { status, out } = compare('tap', [TAPE_PLAIN, hooked], { SUITE_NOT_COMPARED: ' › pid makes sense' });
  assert.strictEqual(status, 0, out);
  assert.match(out, /failed with the hook, not compared: simple › pid makes sense 4400 vs 3372/);
});

test('a test that failed in the second plain run does not count against the hook', () => {
  const hooked = TAPE_PLAIN.replace('ok 2 result', 'not ok 2 result');
  const { status, out } = compare('tap', [TAPE_PLAIN, hooked, hooked, hooked]);
  assert.strictEqual(status, 0, out);
  assert.match(out, /failed in the second plain run too, not counted: simple › result/);
  assert.strictEqual(compare('tap', [TAPE_PLAIN, hooked, hooked, TAPE_PLAIN]).status, 1);
});

// mocha names a hook that fails after its test as a test of its own, one
// the plain run never reports.
test('a failure only the hooked run names counts, unless the second runs settle it', () => {
  const plain = 'ok 1 endless setInterval works\nok 2 Pool should cancel a task\n';
  const hooked = `${plain}not ok 3 endless setInterval "after each" hook: Timeout!\n`;
  assert.strictEqual(compare('tap', [plain, hooked], { SUITE_RETRY: '1' }).status, 2);
  const { status, out } = compare('tap', [plain, hooked]);
  assert.strictEqual(status, 1);
  assert.match(out, /✖ lib: 'endless setInterval "after each" hook: Timeout!' fails with procwire\/register, and the plain run has no such test/);
  const settled = compare('tap', [plain, hooked, plain]);
  assert.strictEqual(settled.status, 0, settled.out);
  assert.match(settled.out, /failed with the hook once, passed in the second hooked run: endless setInterval "after each" hook/);
  assert.strictEqual(compare('tap', [plain, hooked, hooked]).status, 1);
  // It fails in the second plain run as well: the suite's, not the hook's.
  const plainToo = compare('tap', [plain, hooked, hooked, hooked]);
  assert.strictEqual(plainToo.status, 0, plainToo.out);
  assert.match(plainToo.out, /failed in the second plain run too, not counted: endless setInterval "after each"/);
});
