'use strict';
// The worker of bench/peers/tool-pool.js for all three pools: jest-worker
// calls the export, tinypool picks it by name, workerpool is told here (the
// driver marks its workers in the environment).

function length(text) {
  return text.length;
}

module.exports = { length };

if (process.env.PROCWIRE_BENCH_TOOL === 'workerpool') {
  require(require('path').join(__dirname, '..', '..', '.bench-deps', 'node_modules', 'workerpool')).worker({ length });
}
