'use strict';
// One pool worker: counts primes below n (some real CPU work per job).
const { parent } = require('procwire');

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

parent.respond(({ n }) => ({ primes: countPrimes(n), pid: process.pid }));
