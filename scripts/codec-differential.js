'use strict';
// A seeded differential run of procwire's `advanced` encoder against Node's
// own IPC serializer, for longer runs or other seeds than
// test/codec-differential.test.js takes (the generator and the comparison
// are test/helpers/codec-differential.js). It prints the first mismatches
// and a count; exit code 1 when any.
//
//   node scripts/codec-differential.js [count=200000] [seed=1]

const { run } = require('../test/helpers/codec-differential');

const count = Number(process.argv[2] || 200000);
const seed = Number(process.argv[3] || 1);

const { mismatches, first } = run(count, seed);
for (const report of first) console.log(report);
console.log(`${mismatches} of ${count} values differ (seed ${seed})`);
process.exitCode = mismatches > 0 ? 1 : 0;
