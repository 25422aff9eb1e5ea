'use strict';
// Bounded waiting in tests. Every wait here ends, by what it waits for or by
// an error naming what did not happen: a wait that never ends keeps its timer
// or its child alive, and then a failing test hangs its whole file instead of
// failing by name.

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// `promise`, or a rejection naming `what` after `ms`. The timer is cleared
// either way, so a settled wait leaves nothing behind to hold the process.
function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    Promise.resolve(promise).finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    }),
  ]);
}

// Polls `cond` (which may return a promise) every `interval` ms until it
// holds, and throws naming `what` once `ms` have passed without it. `what`
// may be a function, called then, to name the state the wait ended in.
async function until(cond, ms, what, interval = 10) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${typeof what === 'function' ? what() : what}`);
    }
    await sleep(interval);
  }
}

// A promise of the child's exit as { code, signal }, also when the child has
// exited already. Taken right after the spawn it cannot miss the event, which
// a later once(child, 'exit') does when the child died meanwhile.
function exitOf(child) {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

// `promise`, or a rejection once `exited` (an exitOf() promise) settles
// first: a child that died fails the wait for its answer at once, with how
// it ended, instead of at the wait's time limit.
function unlessExited(promise, exited, what) {
  return Promise.race([
    promise,
    exited.then(({ code, signal }) => {
      throw new Error(`the child exited (code ${code}, signal ${signal}) while waiting for ${what}`);
    }),
  ]);
}

// Kills `child` unless it has exited, and resolves once it has; the kill is
// SIGKILL, which a child cannot ignore, so the wait is bounded.
async function killChild(child, exited = exitOf(child)) {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await exited;
}

module.exports = { sleep, withTimeout, until, exitOf, unlessExited, killChild };
