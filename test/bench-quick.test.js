'use strict';
// `procwire bench --quick` keeps to 90 s: every suite has a share of it in
// the registry (bench/lib/cli.js), and a suite's later repeats start only
// while its share lasts (bench/lib/harness.js runPlan), every peer still
// run side by side and each with the same number of samples. A real plan
// with real driver processes; the work in each is a busy loop of a fixed
// length, so the budget, not the work, decides how many repeats run.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const harness = require('../bench/lib/harness');
const { REGISTRY, SUITES, quickBudgetMs } = require('../bench/lib/cli');

test('every suite has a share of --quick, and the shares leave room under 90 s', () => {
  assert.deepStrictEqual(REGISTRY.map((s) => s.name), SUITES);
  const total = REGISTRY.reduce((sum, s) => sum + s.quickSeconds, 0);
  assert.ok(total <= 80, `the suites' shares add up to ${total} s: set-up needs the rest of 90 s`);
  assert.strictEqual(quickBudgetMs('roundtrip', false, undefined), null, 'the full run has no budget');
  assert.strictEqual(quickBudgetMs('roundtrip', true, 5), null, 'an explicit --repeats is honoured');
  assert.ok(quickBudgetMs('roundtrip', true, undefined) > 0);
});

test('a plan under a budget stops repeating when the next repeat would not fit', { timeout: 120_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-bench-quick-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const script = path.join(dir, 'busy.js');
  fs.writeFileSync(script, `
const harness = require(${JSON.stringify(path.join(__dirname, '..', 'bench', 'lib', 'harness.js'))});
if (process.argv[2] === '--driver') harness.driverMain(async (config, tick) => {
  const end = Date.now() + config.ms;
  while (Date.now() < end);
  tick();
  return { data: { 1: { v: config.rep + 1 } } };
});
`);
  const plan = {
    name: 'busy', title: 'busy', script, xs: [1], xLabel: 'x', xUnit: 'count',
    metrics: [{ id: 'v', label: 'v', unit: '', better: 'higher' }],
    peers: [{ id: 'a', label: 'a' }, { id: 'b', label: 'b' }],
    repeats: 20, ticksPerRun: 1, timeoutMs: 60_000, config: () => ({ ms: 200 }),
  };
  const progress = new harness.Progress(0, { stream: process.stderr, enabled: false });
  progress.addTotal(plan.repeats * plan.peers.length);
  // The first repeat measures itself: the budget is about three of them.
  const t0 = Date.now();
  const first = await harness.runPlan({ ...plan, repeats: 1 }, progress);
  const perRepeat = Date.now() - t0;
  const r = await harness.runPlan({ ...plan, budgetMs: perRepeat * 3 }, progress);
  assert.ok(r.repeats >= 1 && r.repeats < plan.repeats, `${r.repeats} repeats of ${plan.repeats}`);
  for (const id of ['a', 'b']) {
    assert.strictEqual(r.data[id][1].v.samples.length, r.repeats, `${id} has one sample per repeat`);
  }
  assert.match(r.notes.join('\n'), new RegExp(`${r.repeats} of ${plan.repeats} repeats fitted`));
  assert.strictEqual(first.repeats, 1);
});
