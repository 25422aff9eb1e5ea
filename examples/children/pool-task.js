'use strict';
// The worker module of examples/pool.js: counts primes below n (real CPU
// work per task), and a named handler that fails on purpose.
function countPrimes(n) {
  let count = 0;
  for (let i = 2; i < n; i++) {
    let prime = true;
    for (let d = 2; d * d <= i; d++) {
      if (i % d === 0) { prime = false; break; }
    }
    if (prime) count++;
  }
  return count;
}

module.exports = Object.assign(({ n }) => ({ primes: countPrimes(n), pid: process.pid }), {
  fail: () => {
    throw new Error('no primes today');
  },
});
