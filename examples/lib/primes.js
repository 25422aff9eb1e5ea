'use strict';
// Counts the primes below n by trial division: real CPU work for the pool
// examples' workers (examples/children/pool-task.js, pool-worker.js).
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

module.exports = { countPrimes };
