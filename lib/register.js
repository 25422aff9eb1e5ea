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
        // lib/fork.js and what it loads come from the parent's start bundle
        // when it is current (see lib/start-bundle.js); lib/native.js, which
        // lib/fork.js has loaded, is taken the same way rather than resolved
        // again.
        const { parentRequire } = require('./start-bundle');
        procwireFork = parentRequire('lib/fork.js').fork;
        nativeAddon = parentRequire('lib/native.js').native === true;
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
// most of what the hook could cost a process that never forks (about 4 ms
// of CPU on the 2-core CI machine, against 1 ms for the hook's own file), so
// the swap waits for the first require of child_process or cluster:
//   - where Node reports user requires and imports on diagnostics channels
//     (Node 22 and later), through them, swapping also at the first ES
//     module imported, whose builtin imports are not reported one by one,
//     and after a require() that loaded child_process unreported (an ES
//     module brought in by require());
//   - where it does not (Node 20), through Module._load, which every
//     require() of a CommonJS caller passes, put back as it was at the swap.
//     There an ES module entry (or --import, a loader, module input) swaps
//     now, since its imports bypass Module._load.
// Where child_process is loaded already, the swap happens now.
const REQUIRE_START = 'tracing:module.require:start';
const REQUIRE_END = 'tracing:module.require:end';
const IMPORT_START = 'tracing:module.import:start';
const WATCHED = new Set(['child_process', 'node:child_process', 'cluster', 'node:cluster']);
const CHILD_PROCESS_LOADED = 'NativeModule child_process';

function swapOnce() {
  let done = false;
  return function swap() {
    if (done) return false;
    done = true;
    if (process.moduleLoadList.includes('NativeModule internal/cluster/primary')) {
      debugLine('register: cluster was loaded before child_process was required (a server listened): ' +
        'its primary keeps Node\'s fork');
    }
    return install();
  };
}

function watchChannels(dc, swap) {
  let reported = false;
  const loaded = newlyLoaded();
  function unsubscribe() {
    dc.unsubscribe(REQUIRE_START, onRequire);
    dc.unsubscribe(REQUIRE_END, onRequireEnd);
    dc.unsubscribe(IMPORT_START, onImport);
  }
  function stop() {
    unsubscribe();
    swap();
  }
  function onRequire(context) {
    reported = true;
    if (context !== null && typeof context === 'object' && WATCHED.has(context.id)) stop();
  }
  // An ES module brought in by require() imports builtins unreported.
  function onRequireEnd() {
    if (loaded()) stop();
  }
  function onImport() {
    stop();
  }
  dc.subscribe(REQUIRE_START, onRequire);
  dc.subscribe(REQUIRE_END, onRequireEnd);
  dc.subscribe(IMPORT_START, onImport);
  // Whether this Node reports requires: one of a builtin already loaded.
  require('path');
  if (!reported) unsubscribe();
  return reported;
}

// A check of whether child_process has been loaded since the last call,
// which reads only the builtins loaded since then.
function newlyLoaded() {
  let seen = process.moduleLoadList.length;
  return function loaded() {
    const list = process.moduleLoadList;
    if (list.length === seen) return false;
    const from = seen;
    seen = list.length;
    for (let i = from; i < list.length; i++) {
      if (list[i] === CHILD_PROCESS_LOADED) return true;
    }
    return false;
  };
}

// Whether this process's entry runs as an ES module (or ES modules load
// before it), as Node 20 decides: --import, a loader, module input or
// default type, an .mjs entry, a .js one under "type": "module", or one
// whose package does not say and that has module syntax (Node 20.19 and
// later detect it).
const ESM_FLAG = /(^|\s)--(import|loader|experimental-loader|experimental-default-type|input-type=module|experimental-detect-module)\b/;
function entryIsModule() {
  if (process.execArgv.some((a) => ESM_FLAG.test(a)) || ESM_FLAG.test(process.env.NODE_OPTIONS || '')) return true;
  const main = process.argv[1];
  if (typeof main !== 'string' || process._eval != null) return false;
  let file;
  try {
    file = require.resolve(main);
  } catch {
    // Node will fail to find it too.
    return false;
  }
  const path = require('path');
  const ext = path.extname(file);
  if (ext === '.mjs') return true;
  if (ext !== '.js') return false;
  const type = packageType(path.dirname(file));
  if (type !== undefined) return type === 'module';
  return hasModuleSyntax(file);
}

// The "type" of the nearest package.json above dir, or undefined.
function packageType(dir) {
  const path = require('path');
  const fs = require('fs');
  for (; ; dir = path.dirname(dir)) {
    let text = null;
    try {
      text = fs.readFileSync(path.join(dir, 'package.json'), 'utf8');
    } catch {
      // None here: the next directory up.
    }
    if (text !== null) {
      try {
        const { type } = JSON.parse(text);
        return type === 'module' || type === 'commonjs' ? type : undefined;
      } catch {
        return undefined;
      }
    }
    if (path.dirname(dir) === dir) return undefined;
  }
}

// Whether a file that no package.json types fails to compile as CommonJS
// for a reason only an ES module has, which is how Node's detection tells.
const MODULE_ONLY = /Cannot use import statement outside a module|Unexpected token 'export'|Cannot use 'import\.meta' outside a module|await is only valid in async functions and the top level bodies of modules/;
const MODULE_WORD = /\b(import|export|await)\b/;
function hasModuleSyntax(file) {
  let source;
  try {
    source = require('fs').readFileSync(file, 'utf8');
  } catch {
    return false;
  }
  // Only a file with one of these words can hold module syntax; most
  // CommonJS entries have none, and skip the compile (the dearest step).
  if (!MODULE_WORD.test(source)) return false;
  if (source.startsWith('#!')) source = `//${source}`;
  try {
    require('vm').compileFunction(source, ['exports', 'require', 'module', '__filename', '__dirname']);
    return false;
  } catch (err) {
    return err instanceof SyntaxError && MODULE_ONLY.test(err.message);
  }
}

// Node 20: Module._load sees every require() of a CommonJS caller. The
// swap comes before cluster loads (its primary takes fork once, then), and
// after any require that loaded child_process some other way (an ES module
// brought in by require()), so a live `import { fork }` binding is brought
// up to date before the caller runs on.
function watchLoad(swap) {
  const Module = require('module');
  const originalLoad = Module._load;
  const loaded = newlyLoaded();
  function restore() {
    if (Module._load === load) Module._load = originalLoad;
    swap();
  }
  function load(request) {
    if (WATCHED.has(request)) {
      restore();
      return originalLoad.apply(this, arguments);
    }
    const result = originalLoad.apply(this, arguments);
    if (loaded()) restore();
    return result;
  }
  Module._load = load;
}

function register() {
  if (optedOut()) return false;
  if (process.moduleLoadList.includes(CHILD_PROCESS_LOADED)) return install();
  const swap = swapOnce();
  if (watchChannels(require('diagnostics_channel'), swap)) return true;
  if (entryIsModule()) return swap();
  watchLoad(swap);
  return true;
}

const registered = register();

module.exports = { registered };
