'use strict';
// procwire/register: `node --require procwire/register app.js` (or the same
// in NODE_OPTIONS, or `--import procwire/register`) makes
// child_process.fork procwire's fork in this process, so tools that fork
// their workers (jest-worker, workerpool, tinypool, cluster, ...) get
// procwire's channel without an edit.
//
// It replaces exactly one thing, child_process.fork, and does so lazily: at
// load it only swaps in a small function. Nothing of procwire (the addon,
// the channel) is loaded until that function is first called, so a process
// that loads the hook and never forks pays for one builtin's property write.
// Because it runs before the main module, Node's cluster primary (which
// takes `fork` from child_process once, when cluster is first loaded) and
// ES modules importing `{ fork }` afterwards get it too.
//
// Descendants: NODE_OPTIONS and process.execArgv carry the hook to every
// Node child, each of which is lazy in the same way.
// Opting out: PROCWIRE_REGISTER=0 in the environment (read at load and at
// each call, and inherited by children), or `{ procwire: false }` in one
// fork() call's options.
// Anything procwire cannot serve (another execPath, so possibly not Node or
// another Node line; the permission model in this process, which refuses
// addons; a process where the addon does not load; an error of procwire's
// own before the child exists) goes to Node's own fork, with one line on
// util.debuglog('procwire') (NODE_DEBUG=procwire), never an error.

const REGISTERED = Symbol.for('procwire.register');
const OPT_OUT_VALUES = ['0', 'false', 'off', 'no'];

function optedOut() {
  const value = process.env.PROCWIRE_REGISTER;
  return value !== undefined && OPT_OUT_VALUES.includes(value.toLowerCase());
}

// The hook's lines go to NODE_DEBUG=procwire, and also to its own section,
// NODE_DEBUG=procwire_register, which adds one line per fork it served: a
// check can then count the forks without procwire's other debug lines, which
// a tool capturing its workers' stderr would see.
let debug = null;
let registerDebug = null;
function debugLine(text, served = false) {
  if (debug === null) {
    debug = require('util').debuglog('procwire');
    registerDebug = require('util').debuglog('procwire_register');
  }
  if (!served && debug.enabled) debug(text);
  else registerDebug(text);
}

// fork's options argument as Node finds it: fork(path, options) or
// fork(path, args, options). Anything else is left to the fork that runs,
// which throws Node's own argument errors.
function optionsArgument(args, options) {
  if (args != null && typeof args === 'object' && !Array.isArray(args)) return args;
  if (options != null && typeof options === 'object' && !Array.isArray(options)) return options;
  return null;
}

// Why this call cannot be served by procwire, or null when it can. Only what
// is known before loading procwire is checked here; the addon's absence is
// known after (see fork()).
function reasonForNodeFork(options) {
  if (optedOut()) return 'PROCWIRE_REGISTER is off';
  if (options !== null && options.procwire === false) return 'the call passed { procwire: false }';
  if (options !== null && options.execPath !== undefined && options.execPath !== process.execPath) {
    return `options.execPath is another binary (${String(options.execPath)})`;
  }
  if (process.permission !== undefined) return 'this process runs under the permission model';
  return null;
}

// The options without the `procwire` key, so neither fork sees an option
// that is not its own.
function withoutOwnOption(args, options, found) {
  if (found === null || !Object.hasOwn(found, 'procwire')) return [args, options];
  const rest = { ...found };
  delete rest.procwire;
  return found === args ? [rest, options] : [args, rest];
}

// Node bounds a message only by its frame (advanced) or V8's longest string
// (json); procwire's default maxMessageSize (256 MiB) is a safety limit for
// its own API. Under the hook a worker's result that Node would carry is
// carried, unless the caller set a limit.
const NODE_MESSAGE_LIMIT = 0xffffffff;
function withNodeLimits(args, options) {
  const found = optionsArgument(args, options);
  if (found !== null && found.maxMessageSize !== undefined) return [args, options];
  if (found === null) {
    // Only where no options were given; malformed ones are left for fork to
    // refuse with Node's own error.
    if (options != null) return [args, options];
    if (args == null) return [{ maxMessageSize: NODE_MESSAGE_LIMIT }];
    return Array.isArray(args) ? [args, { maxMessageSize: NODE_MESSAGE_LIMIT }] : [args, options];
  }
  const limited = { ...found, maxMessageSize: NODE_MESSAGE_LIMIT };
  return found === args ? [limited, options] : [args, limited];
}

function install() {
  const childProcess = require('child_process');
  const nodeFork = childProcess.fork;
  if (nodeFork[REGISTERED] === true) return false;
  let procwireFork = null;
  let nativeAddon = null;

  function fork(modulePath, args, options) {
    const found = optionsArgument(args, options);
    [args, options] = withoutOwnOption(args, options, found);
    let reason = reasonForNodeFork(found);
    if (reason === null && nativeAddon === null) {
      // The first fork loads procwire. If the addon cannot load, procwire
      // would run its pure-JavaScript fallback, which is no faster than
      // Node's own channel: Node's fork serves instead.
      try {
        nativeAddon = require('./native').native === true;
        procwireFork = require('./fork').fork;
      } catch (err) {
        nativeAddon = false;
        reason = `procwire did not load (${err && err.message})`;
      }
    }
    if (reason === null && nativeAddon !== true) reason = 'the native addon is not available';
    if (reason === null) {
      try {
        const child = procwireFork(modulePath, ...withNodeLimits(args, options));
        // One line per served fork, so a check (scripts/library-suites.sh)
        // can tell that a tool's forks really went through procwire.
        debugLine(`register: child_process.fork(${String(modulePath)}) forked through procwire`, true);
        return child;
      } catch (err) {
        // Argument errors are Node's own (procwire's fork checks as Node's
        // does) and are thrown as Node would; procwire's own failures
        // before a child exists (a socketpair refused) fall back.
        if (!(err && typeof err.code === 'string' && err.code.startsWith('ERR_PROCWIRE_'))) throw err;
        reason = `procwire's fork failed (${err.code}: ${err.message})`;
      }
    }
    debugLine(`register: child_process.fork(${String(modulePath)}) runs Node's own fork: ${reason}`);
    return nodeFork.call(this, modulePath, args, options);
  }
  Object.defineProperty(fork, REGISTERED, { value: true });
  Object.defineProperty(fork, 'length', { value: nodeFork.length });

  childProcess.fork = fork;
  // ES modules that import { fork } from 'child_process' after this point
  // read the new function; a namespace made before it is brought up to date.
  require('module').syncBuiltinESMExports();
  return true;
}

// Loading child_process itself (with net, dgram and streams behind it) is
// most of what the hook could cost a process that never forks, so where
// Node reports user requires and imports on diagnostics channels, the swap
// waits for the first require of child_process or cluster (or the first ES
// module loaded, whose builtin imports are not reported one by one); the
// subscription is dropped then. Where Node does not report them (Node 20),
// or child_process is loaded already, the swap happens now.
const REQUIRE_START = 'tracing:module.require:start';
const IMPORT_START = 'tracing:module.import:start';
const WATCHED = new Set(['child_process', 'node:child_process', 'cluster', 'node:cluster']);

function watchForFork(dc) {
  let done = false;
  let reported = false;
  function swap() {
    if (done) return;
    done = true;
    dc.unsubscribe(REQUIRE_START, onRequire);
    dc.unsubscribe(IMPORT_START, onImport);
    if (process.moduleLoadList.includes('NativeModule internal/cluster/primary')) {
      debugLine('register: cluster was loaded before child_process was required (a server listened): ' +
        'its primary keeps Node\'s fork');
    }
    install();
  }
  function onRequire(context) {
    reported = true;
    if (context !== null && typeof context === 'object' && WATCHED.has(context.id)) swap();
  }
  function onImport() {
    swap();
  }
  dc.subscribe(REQUIRE_START, onRequire);
  dc.subscribe(IMPORT_START, onImport);
  // Whether this Node reports requires: one of a builtin already loaded.
  require('path');
  if (!reported) swap();
}

function register() {
  if (optedOut()) return false;
  if (process.moduleLoadList.includes('NativeModule child_process')) return install();
  watchForFork(require('diagnostics_channel'));
  return true;
}

const registered = register();

module.exports = { registered };
