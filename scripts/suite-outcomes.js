'use strict';
// Compares the per-test outcomes of one library's own test suite run plainly
// and with NODE_OPTIONS="--require procwire/register" (scripts/library-suites.sh,
// scripts/upstream-suites.sh):
//
//   node scripts/suite-outcomes.js FORMAT NAME PLAIN_LOG REGISTER_LOG [RETRY_LOG [PLAIN_RETRY_LOG]]
//
// FORMAT is `tap` (TAP from tape, node-tap or mocha's tap reporter) or `jest`
// (the file jest --json --outputFile writes). It prints the counts of both runs
// and every test that fails plainly too (old suites on a newer Node: reported,
// not hidden), and exits 1 naming each test that passes plainly and fails with
// the hook. When the first two runs differ, the caller runs the suite again
// both ways (RETRY_LOG hooked, PLAIN_RETRY_LOG plain): a test then counts
// only if it passed in both plain runs and failed in both hooked ones, and
// one that passed in a second hooked run, or failed in the second plain run,
// is named as such and does not fail the check. A failure only the hooked
// run names (a hook that timed out only there) counts the same way. These old suites assert on
// timing and pids, which a loaded machine upsets either way.
//
// SUITE_NOT_COMPARED, a regular expression, names tests that are run and
// reported but not compared, because they measure the machine rather than
// the library (worker-farm asserts that a worker's pid is within 750 of its
// parent's, which depends on how many processes the whole machine started
// meanwhile).
//
// Test names are keyed with their digits replaced by `#`: tape assertion names
// often carry pids or milliseconds ("pid makes sense 1234 vs 1200"). A name
// that occurs several times passes when every occurrence passes: one that
// passes some times and fails others in the plain run (a timing assertion on
// a loaded machine) does not pass plainly, and is listed with the failures.

const fs = require('fs');
const path = require('path');

const TAP_LINE = /^(\s*)(not ok|ok)\b\s*\d*\s*(?:-\s*)?(.*)$/;
const TAP_HEADER = /^\s*#\s+(.*)$/;
const TAP_DIRECTIVE = /\s#\s*(SKIP|TODO)\b/i;
const TAP_SUMMARY = /^(tests|pass|fail|skip|todo|ok)\b/;

function key(name) {
  return name.replace(/\d+/g, '#').trim();
}

// TAP: a `# heading` (tape's test name) prefixes the assertions under it; an
// indented block (node-tap's subtests) is keyed by its own heading only.
function parseTap(text) {
  const tests = [];
  let heading = '';
  for (const line of text.split('\n')) {
    const header = TAP_HEADER.exec(line);
    if (header !== null) {
      if (!TAP_SUMMARY.test(header[1])) heading = header[1];
      continue;
    }
    const match = TAP_LINE.exec(line);
    if (match === null) continue;
    const skipped = TAP_DIRECTIVE.test(match[3]);
    const name = match[3].replace(TAP_DIRECTIVE, '').replace(/\s#.*$/, '');
    tests.push({ name: heading ? `${heading} › ${name}` : name, outcome: skipped ? 'skip' : match[2] === 'ok' ? 'pass' : 'fail' });
  }
  return tests;
}

// jest --json: one entry per test, keyed by its file (relative to the root
// jest reports) and full name.
function parseJest(text) {
  if (text.trim() === '') return [];
  const report = JSON.parse(text);
  const tests = [];
  for (const file of report.testResults) {
    const where = path.relative(report.testResults.length ? commonRoot(report.testResults) : '', file.name);
    if (file.assertionResults.length === 0 && file.status === 'failed') {
      tests.push({ name: `${where} (the file did not run: ${firstLine(file.message)})`, outcome: 'fail' });
    }
    for (const test of file.assertionResults) {
      const outcome = test.status === 'passed' ? 'pass' : test.status === 'failed' ? 'fail' : 'skip';
      tests.push({ name: `${where} › ${test.fullName}`, outcome });
    }
  }
  return tests;
}

function commonRoot(files) {
  return files.map((f) => path.dirname(f.name)).reduce((a, b) => {
    while (!`${b}/`.startsWith(`${a}/`)) a = path.dirname(a);
    return a;
  });
}

function firstLine(text) {
  return String(text || '').trim().split('\n')[0].slice(0, 200);
}

function read(format, file) {
  const text = file && fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  return format === 'jest' ? parseJest(text) : parseTap(text);
}

function tally(tests) {
  const passes = new Map();
  const runs = new Map();
  const names = new Map();
  const counts = { pass: 0, fail: 0, skip: 0 };
  for (const test of tests) {
    counts[test.outcome]++;
    const k = key(test.name);
    if (!names.has(k)) names.set(k, test.name);
    passes.set(k, (passes.get(k) || 0) + (test.outcome === 'pass' ? 1 : 0));
    if (test.outcome !== 'skip') runs.set(k, (runs.get(k) || 0) + 1);
  }
  const passed = (k) => runs.has(k) && passes.get(k) === runs.get(k);
  return { passes, runs, names, counts, passed };
}

function main() {
  const [format, name, plainLog, registerLog, retryLog, plainRetryLog] = process.argv.slice(2);
  const plain = tally(read(format, plainLog));
  const plainRetry = plainRetryLog ? tally(read(format, plainRetryLog)) : null;
  const hooked = tally(read(format, registerLog));
  const retry = retryLog ? tally(read(format, retryLog)) : null;
  const line = (mode, t) => `${name} (${mode}): ${t.counts.pass} passed, ${t.counts.fail} failed, ${t.counts.skip} skipped`;
  console.log(line('plain', plain));
  console.log(line('register', hooked));
  if (retry !== null) console.log(line('register, second run', retry));
  if (plainRetry !== null) console.log(line('plain, second run', plainRetry));

  const plainFailures = read(format, plainLog).filter((t) => t.outcome === 'fail');
  for (const test of plainFailures) console.log(`  ${name}: fails plainly too (not counted): ${test.name}`);

  const notCompared = process.env.SUITE_NOT_COMPARED ? new RegExp(process.env.SUITE_NOT_COMPARED) : null;
  const failedIn = (t, k) => t.runs.has(k) && !t.passed(k);
  let regressions = 0;
  // One test that failed with the hook, unless the second runs settled it
  // (or it is not compared): again.plain(k) and again.hooked(k) say whether
  // the second plain and hooked runs failed it too; claim: what the failure
  // is, for the ✖ line.
  const judge = (k, testName, again, claim) => {
    if (plainRetry !== null && again.plain(k)) {
      console.log(`  ${name}: failed in the second plain run too, not counted: ${testName}`);
      return;
    }
    if (notCompared !== null && notCompared.test(testName)) {
      console.log(`  ${name}: failed with the hook, not compared: ${testName}`);
      return;
    }
    if (retry !== null && !again.hooked(k)) {
      console.log(`  ${name}: failed with the hook once, passed in the second hooked run: ${testName}`);
      return;
    }
    regressions++;
    if (retry === null && process.env.SUITE_RETRY === '1') {
      console.log(`  ${name}: failed with the hook, run again: ${testName}`);
    } else {
      console.log(`✖ ${name}: '${testName}' ${claim}`);
    }
  };
  for (const k of plain.names.keys()) {
    if (!plain.passed(k) || hooked.passed(k)) continue;
    const again = { plain: (key2) => !plainRetry.passed(key2), hooked: (key2) => !retry.passed(key2) };
    judge(k, plain.names.get(k), again, 'passes plainly and fails with procwire/register');
  }
  // A failure the plain run never names (a mocha hook that timed out only
  // with the hook, a test made by a failed one): it counts too, or a suite
  // could fail with the hook in a way the comparison never looked at. It is
  // settled by the second runs in the same way; in the second hooked run it
  // counts again only if it failed there again.
  for (const k of hooked.names.keys()) {
    if (plain.names.has(k) || !failedIn(hooked, k)) continue;
    const again = { plain: (key2) => failedIn(plainRetry, key2), hooked: (key2) => failedIn(retry, key2) };
    judge(k, hooked.names.get(k), again, 'fails with procwire/register, and the plain run has no such test');
  }
  // Exit 2 asks the caller for a second hooked run; 1 is a regression left
  // after it (or when no second run was asked for).
  if (regressions > 0) process.exit(retry === null && process.env.SUITE_RETRY === '1' ? 2 : 1);
  if (plain.counts.pass === 0) {
    console.log(`✖ ${name}: no test passed plainly, so the comparison proves nothing`);
    process.exit(1);
  }
}

main();
