'use strict';
// mocha --parallel (workerpool process workers underneath) on a generated
// suite, as a project runs it: the CLI, -j 2, the json reporter.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { toolPath, REGISTERED } = require('./helpers');

const MOCHA = path.join(toolPath('mocha'), 'bin', 'mocha.js');
const HELPERS = path.join(__dirname, 'helpers.js');

// `files` spec files of 5 tests; the first has one failing test, and every
// test records in `marks` whether its worker was forked through procwire.
function writeSuite(dir, files) {
  const marks = path.join(dir, 'marks');
  fs.mkdirSync(marks);
  for (let f = 0; f < files; f++) {
    const lines = [
      "'use strict';",
      "const assert = require('assert');",
      "const fs = require('fs');",
      "const path = require('path');",
      `const { forkedByProcwire } = require(${JSON.stringify(HELPERS)});`,
      `describe('file ${f}', () => {`,
    ];
    for (let i = 0; i < 5; i++) {
      lines.push(`  it('test ${i}', () => {`,
        `    fs.writeFileSync(path.join(${JSON.stringify(marks)}, '${f}-${i}-' + process.pid), String(forkedByProcwire()));`,
        `    assert.strictEqual(${i} + 1, ${f === 0 && i === 4 ? 0 : i + 1});`,
        '  });');
    }
    lines.push('});');
    fs.writeFileSync(path.join(dir, `file${f}.spec.js`), `${lines.join('\n')}\n`);
  }
  return marks;
}

test('mocha --parallel -j 2 runs a 20-file suite and reports its one failure', { timeout: 120_000 }, (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-mocha-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const marks = writeSuite(dir, 20);
  const result = childProcess.spawnSync(process.execPath, [MOCHA, '--parallel', '-j', '2', '--reporter', 'json', path.join(dir, '*.spec.js')],
    { encoding: 'utf8', timeout: 100_000, maxBuffer: 16 * 1024 * 1024 });
  assert.strictEqual(result.status, 1, `mocha exited ${result.status} ${result.signal}: ${result.stderr}`);
  const report = JSON.parse(result.stdout);
  assert.deepStrictEqual({ tests: report.stats.tests, passes: report.stats.passes, failures: report.stats.failures },
    { tests: 100, passes: 99, failures: 1 });
  assert.strictEqual(report.failures[0].fullTitle, 'file 0 test 4');
  const seen = fs.readdirSync(marks).map((name) => fs.readFileSync(path.join(marks, name), 'utf8'));
  assert.strictEqual(seen.length, 100);
  assert.ok(seen.every((v) => v === String(REGISTERED)), `workers forked by procwire: ${[...new Set(seen)]}, expected ${REGISTERED}`);
  const workers = new Set(fs.readdirSync(marks).map((name) => name.split('-')[2]));
  assert.ok(workers.size >= 1 && workers.size <= 2, `${workers.size} worker processes`);
});
