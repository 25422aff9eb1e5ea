'use strict';
// The worker module of examples/pool.js: counts primes below n (real CPU
// work per task), and a named handler that fails on purpose.
const { countPrimes } = require('../lib/primes');

module.exports = Object.assign(({ n }) => ({ primes: countPrimes(n), pid: process.pid }), {
  fail: () => {
    throw new Error('no primes today');
  },
});
