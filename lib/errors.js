'use strict';
// Every error procwire raises has a stable `code` and its own class. This
// table is the one place they are defined; index.d.ts pins the same codes and
// README.md documents them.

const CODES = {
  ERR_PROCWIRE_INVALID_ARG: ['InvalidArgumentError', TypeError,
    'An argument has the wrong type or value.'],
  ERR_PROCWIRE_INVALID_MESSAGE: ['InvalidMessageError', TypeError,
    'The top-level message is of a type Node\'s IPC refuses (undefined, symbol, function, bigint).'],
  ERR_PROCWIRE_UNSERIALIZABLE: ['UnserializableError', Error,
    'The message contains a value the codec cannot serialize (function, symbol, SharedArrayBuffer, ...).'],
  ERR_PROCWIRE_DECODE: ['DecodeError', Error,
    'A frame arrived intact but its payload could not be decoded; the frame was skipped.'],
  ERR_PROCWIRE_BAD_HOST_TAG: ['BadHostTagError', Error,
    'A payload holds a host object whose tag is neither 0 (view) nor 1 (other host object).'],
  ERR_PROCWIRE_BAD_VIEW_TYPE: ['BadViewTypeError', Error,
    'A payload holds an ArrayBufferView with an unknown type index.'],
  ERR_PROCWIRE_BAD_VIEW_LENGTH: ['BadViewLengthError', Error,
    'A payload holds an ArrayBufferView whose byte length is not a multiple of its element size.'],
  ERR_PROCWIRE_MESSAGE_TOO_LARGE: ['MessageTooLargeError', RangeError,
    'A frame\'s declared length exceeds maxMessageSize; the stream cannot be framed any more.'],
  ERR_PROCWIRE_CHANNEL_CLOSED: ['ChannelClosedError', Error,
    'The channel is closed (or closed before the operation completed).'],
  ERR_PROCWIRE_SOCKET: ['SocketError', Error,
    'A system call on the channel\'s socket failed (errno in `errno`, name in `syscallCode`).'],
  ERR_PROCWIRE_CONNECT_FAILED: ['ConnectError', Error,
    'Connecting to a named channel or TCP address failed.'],
  ERR_PROCWIRE_LISTEN_FAILED: ['ListenError', Error,
    'Listening on a name or address failed (in use, no permission, ...).'],
  ERR_PROCWIRE_INSECURE_PATH: ['InsecurePathError', Error,
    'The directory for named channels is not private to this user.'],
  ERR_PROCWIRE_REQUEST_TIMEOUT: ['RequestTimeoutError', Error,
    'A request got no reply within its timeout.'],
  ERR_PROCWIRE_REQUEST_ABORTED: ['RequestAbortedError', Error,
    'A request was aborted through its AbortSignal.'],
  ERR_PROCWIRE_REMOTE_ERROR: ['RemoteError', Error,
    'The peer\'s responder threw or rejected; `remote` holds its name, message, code and stack.'],
  ERR_PROCWIRE_NO_RESPONDER: ['NoResponderError', Error,
    'The peer has no responder registered (channel.respond) for requests.'],
  ERR_PROCWIRE_HANDLE_UNSUPPORTED: ['HandleUnsupportedError', Error,
    'Passing a handle (socket, server) needs a unix socket between the two ends: TCP, TLS, NATS and the JS fallback cannot carry one.'],
  ERR_PROCWIRE_PEER_REJECTED: ['PeerRejectedError', Error,
    'The peer\'s credentials (uid) are not allowed on this server.'],
  ERR_PROCWIRE_AUTH_FAILED: ['AuthFailedError', Error,
    'Authentication failed: the peer does not know the shared secret, broke the handshake, closed the channel before it completed, or a key file is unsafe or unreadable.'],
  ERR_PROCWIRE_HELLO_TIMEOUT: ['HelloTimeoutError', Error,
    'The peer did not complete the authentication handshake within the timeout.'],
  ERR_PROCWIRE_AUTH_REQUIRED: ['AuthRequiredError', Error,
    'Authentication is required but no secret is configured, or the peer sent messages before authenticating.'],
  ERR_PROCWIRE_QUEUE_LIMIT: ['QueueLimitError', RangeError,
    'More than maxQueuedBytes waited to be written (the peer stopped reading); the channel was closed.'],
  ERR_PROCWIRE_SEGMENT: ['SegmentError', Error,
    'A shared-memory segment from the peer failed its checks (not a sealed memfd, missing, out of range, an unknown recycled segment id).'],
  ERR_PROCWIRE_RING_CORRUPT: ['RingCorruptError', Error,
    "The peer's shared-memory ring holds impossible indices or records; that channel was closed (reason 'protocol-error')."],
  ERR_PROCWIRE_TRANSFER: ['TransferError', Error,
    'A buffer in a transfer list could not be handed over (still in use elsewhere, too many, not transferable).'],
  ERR_PROCWIRE_NATIVE_UNAVAILABLE: ['NativeUnavailableError', Error,
    'The native addon could not be loaded.'],
  ERR_PROCWIRE_NATS: ['NatsError', Error,
    'The NATS client or server failed (connection closed for good, permission denied, protocol error; or no NATS client is installed, and the message names the package to install); `cause` holds the client error.'],
  ERR_PROCWIRE_OUT_OF_MEMORY: ['OutOfMemoryError', RangeError,
    'Memory could not be allocated: for data from the peer (that channel was closed), or for a message being sent (send() throws; nothing was queued, and the channel goes on). The process goes on either way.'],
  ERR_PROCWIRE_FRAME_TRUNCATED: ['FrameTruncatedError', Error,
    'The peer closed the stream in the middle of a frame; the partial message was lost (close reason \'truncated\').'],
  ERR_PROCWIRE_PROTOCOL: ['ProtocolError', Error,
    'The peer broke procwire\'s control protocol (an invalid acknowledgement, count or size, or a recycled segment returned that was not lent); the channel was closed (reason \'protocol-error\').'],
  ERR_PROCWIRE_CLUSTER_LOADED: ['ClusterLoadedError', Error,
    'procwire.cluster was used after Node\'s cluster module had been loaded (its primary then forks with child_process.fork).'],
  ERR_PROCWIRE_PEER_UNREACHABLE: ['PeerUnreachableError', Error,
    'NATS had no subscriber for the peer\'s subject (503 no responders): the peer is gone, or briefly resubscribing after a failover.'],
  ERR_PROCWIRE_NO_PARENT: ['NoParentError', Error,
    'requireParent() found no procwire parent: the process was not forked with { child: \'procwire\' } (procwire.parent is null).'],
  ERR_PROCWIRE_POOL_WORKER_EXITED: ['PoolWorkerExitedError', Error,
    'A pool worker died (or was killed) while running this task; `pid`, `exitCode`, `signalCode` and `stderr` (its last output) say how. The task was not retried.'],
  ERR_PROCWIRE_POOL_WORKER_START: ['PoolWorkerStartError', Error,
    'A pool worker could not start: its module is missing, does not parse, threw while loading, or exports no handler; `cause` holds that error.'],
  ERR_PROCWIRE_POOL_QUEUE_FULL: ['PoolQueueFullError', RangeError,
    'The pool\'s queue already holds maxQueue tasks; the task was refused.'],
  ERR_PROCWIRE_POOL_CLOSED: ['PoolClosedError', Error,
    'The pool was closed or destroyed: it takes no new task, and destroy() rejects the tasks it still had.'],
  ERR_PROCWIRE_POOL_NO_HANDLER: ['PoolNoHandlerError', Error,
    'The pool worker\'s module exports no handler of the task\'s name.'],
  ERR_PROCWIRE_TASK_TIMEOUT: ['TaskTimeoutError', Error,
    'A pool task did not finish within its timeout; it was removed from the queue or aborted in its worker.'],
  ERR_PROCWIRE_TASK_ABORTED: ['TaskAbortedError', Error,
    'A pool task was aborted through its AbortSignal; it was removed from the queue or aborted in its worker.'],
};

// Every procwire error is a ProcwireError: `err instanceof ProcwireError` is
// true for all of them. Each coded class still extends the built-in that fits
// (TypeError for bad arguments, RangeError for limits), as Node's own errors
// do, so the base is a brand checked by Symbol.hasInstance rather than a
// prototype every class shares.
const kProcwireError = Symbol('procwire.error');

class ProcwireError extends Error {
  constructor(message, options) {
    super(message, options);
    Object.defineProperty(this, kProcwireError, { value: true });
  }

  static [Symbol.hasInstance](value) {
    return value !== null && typeof value === 'object' && value[kProcwireError] === true;
  }
}

// Each coded class is made the first time it is needed (an error of its
// code, or the whole table through `classes`): making all 40 at load cost a
// forked child about 0.3 ms of its start, where it needs at most a few.
const byCode = new Map();

function classFor(code) {
  let cls = byCode.get(code);
  if (cls !== undefined) return cls;
  if (!Object.hasOwn(CODES, code)) return undefined;
  const [name, Base, description] = CODES[code];
  // Each class extends the built-in that fits (TypeError, RangeError, Error)
  // so `instanceof TypeError` keeps working, and carries a fixed code.
  cls = {
    [name]: class extends Base {
      constructor(message, options) {
        super(message || description, options);
        Object.defineProperty(this, kProcwireError, { value: true });
        this.code = code;
      }
      get name() { return name; }
    },
  }[name];
  Object.defineProperty(cls, 'code', { value: code });
  Object.defineProperty(cls, 'description', { value: description });
  byCode.set(code, cls);
  return cls;
}

// Every class by name, ProcwireError first and then in CODES' order (what
// procwire.errors holds), made once.
let allClasses = null;

function classes() {
  if (allClasses === null) {
    allClasses = { ProcwireError };
    for (const [code, [name]] of Object.entries(CODES)) allClasses[name] = classFor(code);
  }
  return allClasses;
}

// Makes an error for a code. `cause` (optional) is kept as error.cause; extra
// own properties (errno, reason, ...) are copied from `props`.
function makeError(code, message, cause, props) {
  const cls = classFor(code);
  if (cls === undefined) throw new Error(`procwire: unknown error code ${code}`);
  const err = cause === undefined ? new cls(message) : new cls(message, { cause });
  if (props) Object.assign(err, props);
  return err;
}

// An error for a failed system call, from its errno's name ('EADDRINUSE'),
// which is how the addon and Node's own errors report one. `errno` is the
// positive number for that name on this system, when it has one.
function systemError(code, errnoName, syscall, detail) {
  const util = require('util');
  const name = typeof errnoName === 'string' && errnoName.length > 0 ? errnoName : 'UNKNOWN';
  const number = require('os').constants.errno[name];
  const map = typeof number === 'number' && util.getSystemErrorMap ? util.getSystemErrorMap().get(-number) : undefined;
  const text = map ? map[1] : name;
  const where = detail ? ` ${detail}` : '';
  return makeError(code, `${syscall}${where} failed: ${name} (${text})`, undefined,
    { errno: typeof number === 'number' ? number : undefined, syscall, syscallCode: name });
}

// Node's own codes, for the child_process surface of fork(): there a drop-in
// must throw and emit exactly what Node does (same code, class and message),
// so code written against child_process keeps matching them. Each entry is
// [Base, message builder].
const util = require('util');

// Node's wording for the value an argument had ("Received ...").
function describeReceived(value) {
  if (value == null) return ` Received ${value}`;
  if (typeof value === 'function') return ` Received function ${value.name}`;
  if (typeof value === 'object') {
    if (value.constructor && value.constructor.name) return ` Received an instance of ${value.constructor.name}`;
    return ` Received ${util.inspect(value, { depth: -1 })}`;
  }
  let inspected = util.inspect(value, { colors: false });
  if (inspected.length > 25) inspected = `${inspected.slice(0, 25)}...`;
  return ` Received type ${typeof value} (${inspected})`;
}

const NODE_CODES = {
  // (name, expected: e.g. 'of type object', value)
  ERR_INVALID_ARG_TYPE: [TypeError, (name, expected, value) =>
    `The "${name}" ${name.includes('.') ? 'property' : 'argument'} must be ${expected}.${describeReceived(value)}`],
  ERR_INVALID_ARG_VALUE: [TypeError, (name, value, reason = 'is invalid') => {
    let inspected = util.inspect(value);
    if (inspected.length > 128) inspected = `${inspected.slice(0, 128)}...`;
    return `The ${name.includes('.') ? 'property' : 'argument'} '${name}' ${reason}. Received ${inspected}`;
  }],
  ERR_MISSING_ARGS: [TypeError, (name) => `The "${name}" argument must be specified`],
  ERR_IPC_CHANNEL_CLOSED: [Error, () => 'Channel closed'],
  ERR_IPC_DISCONNECTED: [Error, () => 'IPC channel is already disconnected'],
  ERR_IPC_ONE_PIPE: [Error, () => 'Child process can have only one IPC pipe'],
  ERR_INVALID_HANDLE_TYPE: [TypeError, () => 'This handle type cannot be sent'],
  ERR_CHILD_CLOSED_BEFORE_REPLY: [Error, () => 'Child closed before reply received'],
  ERR_CHILD_PROCESS_IPC_REQUIRED: [Error, (name) => `Forked processes must have an IPC channel, missing value 'ipc' in ${name}`],
};

// Makes an error shaped as Node's internal ones: `code` set, the name being
// the base's, and the stack headed "TypeError [CODE]: message" as Node's.
function nodeError(code, ...args) {
  const [Base, build] = NODE_CODES[code];
  const err = new Base(build(...args));
  Object.defineProperty(err, 'code', { value: code, enumerable: true, writable: true, configurable: true });
  if (typeof err.stack === 'string') {
    err.stack = err.stack.replace(/^[A-Za-z]*Error/, (name) => `${name} [${code}]`);
  }
  return err;
}

// A bad argument (ERR_PROCWIRE_INVALID_ARG); lib/validate.js, the codec
// registry and the hello all use this one.
function invalidArg(message) {
  return makeError('ERR_PROCWIRE_INVALID_ARG', message);
}

module.exports = {
  CODES, NODE_CODES, makeError, systemError, nodeError, ProcwireError, invalidArg,
  // Every coded class, made on first read.
  get classes() { return classes(); },
};
