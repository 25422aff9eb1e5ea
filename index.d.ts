// Type definitions for procwire. Kept in step with lib/ (the error codes with
// lib/errors.js; the runtime exports with lib/index.js and index.mjs, checked
// by test/exports.test.js).

/// <reference types="node" />

import { EventEmitter } from 'node:events';
import { ChildProcess, ForkOptions } from 'node:child_process';

export type Serialization = 'advanced' | 'json';

/** Every stable error code procwire raises (one class each, see `errors`). */
export type ErrorCode =
  | 'ERR_PROCWIRE_INVALID_ARG'
  | 'ERR_PROCWIRE_INVALID_MESSAGE'
  | 'ERR_PROCWIRE_UNSERIALIZABLE'
  | 'ERR_PROCWIRE_DECODE'
  | 'ERR_PROCWIRE_BAD_HOST_TAG'
  | 'ERR_PROCWIRE_BAD_VIEW_TYPE'
  | 'ERR_PROCWIRE_BAD_VIEW_LENGTH'
  | 'ERR_PROCWIRE_MESSAGE_TOO_LARGE'
  | 'ERR_PROCWIRE_CHANNEL_CLOSED'
  | 'ERR_PROCWIRE_SOCKET'
  | 'ERR_PROCWIRE_CONNECT_FAILED'
  | 'ERR_PROCWIRE_LISTEN_FAILED'
  | 'ERR_PROCWIRE_INSECURE_PATH'
  | 'ERR_PROCWIRE_REQUEST_TIMEOUT'
  | 'ERR_PROCWIRE_REQUEST_ABORTED'
  | 'ERR_PROCWIRE_REMOTE_ERROR'
  | 'ERR_PROCWIRE_NO_RESPONDER'
  | 'ERR_PROCWIRE_HANDLE_UNSUPPORTED'
  | 'ERR_PROCWIRE_PEER_REJECTED'
  | 'ERR_PROCWIRE_AUTH_FAILED'
  | 'ERR_PROCWIRE_HELLO_TIMEOUT'
  | 'ERR_PROCWIRE_AUTH_REQUIRED'
  | 'ERR_PROCWIRE_QUEUE_LIMIT'
  | 'ERR_PROCWIRE_SEGMENT'
  | 'ERR_PROCWIRE_RING_CORRUPT'
  | 'ERR_PROCWIRE_TRANSFER'
  | 'ERR_PROCWIRE_NATIVE_UNAVAILABLE'
  | 'ERR_PROCWIRE_NATS'
  | 'ERR_PROCWIRE_PEER_UNREACHABLE'
  | 'ERR_PROCWIRE_OUT_OF_MEMORY'
  | 'ERR_PROCWIRE_FRAME_TRUNCATED'
  | 'ERR_PROCWIRE_PROTOCOL'
  | 'ERR_PROCWIRE_CLUSTER_LOADED'
  | 'ERR_PROCWIRE_NO_PARENT'
  | 'ERR_PROCWIRE_POOL_WORKER_EXITED'
  | 'ERR_PROCWIRE_POOL_WORKER_START'
  | 'ERR_PROCWIRE_POOL_QUEUE_FULL'
  | 'ERR_PROCWIRE_POOL_CLOSED'
  | 'ERR_PROCWIRE_POOL_NO_HANDLER'
  | 'ERR_PROCWIRE_TASK_TIMEOUT'
  | 'ERR_PROCWIRE_TASK_ABORTED';

export interface ProcwireError extends Error {
  readonly code: ErrorCode;
  /** For ERR_PROCWIRE_SOCKET / CONNECT_FAILED / LISTEN_FAILED. */
  errno?: number;
  syscall?: string;
  syscallCode?: string;
  /** For ERR_PROCWIRE_CHANNEL_CLOSED: why the channel closed. */
  reason?: CloseReason;
  /** For ERR_PROCWIRE_REMOTE_ERROR: what the peer's responder (or a pool task's handler) threw. */
  remote?: { name: string; message: string; code?: string; stack?: string };
  /** For ERR_PROCWIRE_POOL_NO_HANDLER: the name of the handler the task asked for. */
  taskName?: string;
  /** For errors thrown by Framer.push without onError: the chunk's good messages. */
  messages?: unknown[];
  /**
   * For ERR_PROCWIRE_CHANNEL_CLOSED (and requests it rejects) on a forked child's channel, and for
   * ERR_PROCWIRE_POOL_WORKER_EXITED / _WORKER_START (a pool worker): the
   * child's pid and, once it has exited, its exit code or signal and the last lines of its stderr
   * when stderr is piped (`silent: true` or `stdio: 'pipe'`).
   */
  pid?: number;
  exitCode?: number | null;
  signalCode?: NodeJS.Signals | null;
  stderr?: string;
  /** For ERR_PROCWIRE_CONNECT_FAILED: the address tried (a socket path, or a TCP host with `port`). */
  address?: string;
  port?: number;
}

type ErrorClass<C extends ErrorCode> = {
  new (message?: string, options?: { cause?: unknown }): ProcwireError & { readonly code: C };
  readonly code: C;
  readonly description: string;
};

export declare const errors: {
  InvalidArgumentError: ErrorClass<'ERR_PROCWIRE_INVALID_ARG'>;
  InvalidMessageError: ErrorClass<'ERR_PROCWIRE_INVALID_MESSAGE'>;
  UnserializableError: ErrorClass<'ERR_PROCWIRE_UNSERIALIZABLE'>;
  DecodeError: ErrorClass<'ERR_PROCWIRE_DECODE'>;
  BadHostTagError: ErrorClass<'ERR_PROCWIRE_BAD_HOST_TAG'>;
  BadViewTypeError: ErrorClass<'ERR_PROCWIRE_BAD_VIEW_TYPE'>;
  BadViewLengthError: ErrorClass<'ERR_PROCWIRE_BAD_VIEW_LENGTH'>;
  MessageTooLargeError: ErrorClass<'ERR_PROCWIRE_MESSAGE_TOO_LARGE'>;
  ChannelClosedError: ErrorClass<'ERR_PROCWIRE_CHANNEL_CLOSED'>;
  SocketError: ErrorClass<'ERR_PROCWIRE_SOCKET'>;
  ConnectError: ErrorClass<'ERR_PROCWIRE_CONNECT_FAILED'>;
  ListenError: ErrorClass<'ERR_PROCWIRE_LISTEN_FAILED'>;
  InsecurePathError: ErrorClass<'ERR_PROCWIRE_INSECURE_PATH'>;
  RequestTimeoutError: ErrorClass<'ERR_PROCWIRE_REQUEST_TIMEOUT'>;
  RequestAbortedError: ErrorClass<'ERR_PROCWIRE_REQUEST_ABORTED'>;
  RemoteError: ErrorClass<'ERR_PROCWIRE_REMOTE_ERROR'>;
  NoResponderError: ErrorClass<'ERR_PROCWIRE_NO_RESPONDER'>;
  HandleUnsupportedError: ErrorClass<'ERR_PROCWIRE_HANDLE_UNSUPPORTED'>;
  PeerRejectedError: ErrorClass<'ERR_PROCWIRE_PEER_REJECTED'>;
  AuthFailedError: ErrorClass<'ERR_PROCWIRE_AUTH_FAILED'>;
  HelloTimeoutError: ErrorClass<'ERR_PROCWIRE_HELLO_TIMEOUT'>;
  AuthRequiredError: ErrorClass<'ERR_PROCWIRE_AUTH_REQUIRED'>;
  QueueLimitError: ErrorClass<'ERR_PROCWIRE_QUEUE_LIMIT'>;
  SegmentError: ErrorClass<'ERR_PROCWIRE_SEGMENT'>;
  RingCorruptError: ErrorClass<'ERR_PROCWIRE_RING_CORRUPT'>;
  TransferError: ErrorClass<'ERR_PROCWIRE_TRANSFER'>;
  NativeUnavailableError: ErrorClass<'ERR_PROCWIRE_NATIVE_UNAVAILABLE'>;
  NatsError: ErrorClass<'ERR_PROCWIRE_NATS'>;
  PeerUnreachableError: ErrorClass<'ERR_PROCWIRE_PEER_UNREACHABLE'>;
  OutOfMemoryError: ErrorClass<'ERR_PROCWIRE_OUT_OF_MEMORY'>;
  FrameTruncatedError: ErrorClass<'ERR_PROCWIRE_FRAME_TRUNCATED'>;
  ProtocolError: ErrorClass<'ERR_PROCWIRE_PROTOCOL'>;
  ClusterLoadedError: ErrorClass<'ERR_PROCWIRE_CLUSTER_LOADED'>;
  NoParentError: ErrorClass<'ERR_PROCWIRE_NO_PARENT'>;
  ProcwireError: new (...args: any[]) => Error;
  PoolWorkerExitedError: ErrorClass<'ERR_PROCWIRE_POOL_WORKER_EXITED'>;
  PoolWorkerStartError: ErrorClass<'ERR_PROCWIRE_POOL_WORKER_START'>;
  PoolQueueFullError: ErrorClass<'ERR_PROCWIRE_POOL_QUEUE_FULL'>;
  PoolClosedError: ErrorClass<'ERR_PROCWIRE_POOL_CLOSED'>;
  PoolNoHandlerError: ErrorClass<'ERR_PROCWIRE_POOL_NO_HANDLER'>;
  TaskTimeoutError: ErrorClass<'ERR_PROCWIRE_TASK_TIMEOUT'>;
  TaskAbortedError: ErrorClass<'ERR_PROCWIRE_TASK_ABORTED'>;
};
export declare const codes: ErrorCode[];

export interface Codec {
  readonly name: Serialization;
  /** One whole frame: advanced = u32 BE length + V8 payload; json = JSON + '\n'. */
  encode(value: unknown): Buffer;
  /** One payload (no length header, no '\n'). */
  decode(payload: ArrayBufferView): any;
}
export declare const codec: { readonly advanced: Codec; readonly json: Codec };

export interface FramerOptions {
  serialization?: Serialization;
  /** Default 256 MiB; at most 0xffffffff. */
  maxMessageSize?: number;
  /** Receives each frame that failed to decode, and the fatal framing error. */
  onError?: (err: ProcwireError) => void;
}
export declare class Framer {
  constructor(options?: FramerOptions);
  readonly serialization: Serialization;
  readonly maxMessageSize: number;
  /** Every complete message of this chunk, decoded. */
  push(chunk: ArrayBufferView): any[];
  /** Bytes held for a frame that spans chunks. */
  readonly buffering: number;
}

export type CloseReason = 'local' | 'destroyed' | 'peer-closed' | 'peer-reset' | 'framing-error' | 'error'
  /** The peer closed in the middle of a frame (ERR_PROCWIRE_FRAME_TRUNCATED): a message was lost. */
  | 'truncated'
  /** The peer sent an invalid control message (ERR_PROCWIRE_PROTOCOL). */
  | 'protocol-error';

export interface SizeBucket { min: number; max: number; count: number }
export interface ChannelStats {
  messagesIn: number;
  messagesOut: number;
  bytesIn: number;
  bytesOut: number;
  queuedBytes: number;
  writeCalls: number;
  readCalls: number;
  decodeErrors: number;
  bufferedBytes: number;
  pendingRequests: number;
  /** Messages and segment bytes that travelled through shared memory. */
  outOfLine: { messagesOut: number; bytesOut: number; messagesIn: number; bytesIn: number; enabled: boolean };
  /** Shared-memory rings (procwire peers on one host): on once both directions are set up. */
  rings: { enabled: boolean; messagesOut: number; messagesIn: number };
  histogram: { in: SizeBucket[]; out: SizeBucket[] };
}

export interface ChannelOptions {
  serialization?: Serialization;
  maxMessageSize?: number;
  /** send() returns false at or above this many queued bytes. Default 1 MiB. */
  highWaterMark?: number;
  /** Past this many queued bytes the channel closes with ERR_PROCWIRE_QUEUE_LIMIT. Default 1 GiB. */
  maxQueuedBytes?: number;
  /**
   * Large binary views through shared memory (procwire peers over unix sockets only):
   * 'auto' (default) above outOfLineThreshold, 'always', or 'never' (inline).
   */
  outOfLine?: 'auto' | 'always' | 'never';
  /** Bytes from which a view goes out of line in 'auto' mode. */
  outOfLineThreshold?: number;
  /**
   * Frames through shared-memory rings between procwire ends on one host (procwire children,
   * named unix channels): 'auto' (default) when both ends can, or 'never' (the socket only).
   */
  rings?: 'auto' | 'never';
  /** Shared-memory segments not yet acknowledged by the peer before send() returns false. Default 128. */
  maxSegmentsInFlight?: number;
  /**
   * Recycled shared-memory segments for out-of-line messages (no page faults, one memcpy each)
   * and transfers sealed without unmapping first. This end then trusts the peer not to change a
   * message's bytes after sending it (see docs/rings.md). Default: true on fork channels (a
   * parent and its own child), false elsewhere. Used in a direction only when the receiving end
   * allows it and the sending end has it on.
   */
  segmentPool?: boolean;
  /** Bytes of recycled segments (idle and in flight) per channel; beyond it, sealed copies. Default 256 MiB. */
  segmentPoolMaxBytes?: number;
  /** Recycled segments per channel. Default 256. */
  segmentPoolMaxCount?: number;
  /** Idle recycled segments are dropped after this many ms without a return. Default 5000. */
  segmentPoolIdleTimeout?: number;
  /**
   * Requests answered by respond() at once. Default 1024. Further requests wait in arrival order;
   * when 1024 wait, reading pauses until half of them have started (nothing is dropped).
   */
  maxConcurrentRequests?: number;
  /** Milliseconds a request() waits for its reply unless it says otherwise. Default 30000; 0: no limit. */
  requestTimeout?: number;
}

/** Options of procwire.listen/connect('nats://...'). */
export interface NatsOptions extends ChannelOptions {
  /** Service subject (required). */
  subject: string;
  /** listen only: queue group (default 'procwire'). */
  queue?: string;
  /** More NATS server URLs. */
  servers?: string[];
  /** Options passed to the NATS client's connect() as they are (reconnect policy: maxReconnectAttempts, reconnectTimeWait, ...). */
  nats?: Record<string, unknown>;
  /** Which NATS client: '@nats-io/transport-node' (v3, the default when installed) or 'nats' (v2). */
  natsClient?: '@nats-io/transport-node' | 'nats';
  /** Credentials: user and password, a token, an nkey seed, or a .creds file (its text or path). */
  credentials?: { user: string; pass?: string } | { token: string } | { nkey: string } | { creds: string };
  /** The NATS client's TLS options (caFile, certFile, keyFile, or ca, cert, key). */
  tls?: Record<string, unknown>;
  /** An existing NatsConnection to share (procwire will not close it). */
  connection?: unknown;
  /** Prefix of channel subjects (default '_PROCWIRE'). */
  prefix?: string;
  helloTimeout?: number;
  /** Liveness ping interval in ms (default 5000; 0 disables). */
  heartbeat?: number;
  /** Silence after which the channel closes (default 4 x heartbeat). */
  peerTimeout?: number;
}

/** Options of durable NATS channels: listen/connect('nats://...', { durable: true, ... }). */
export interface DurableNatsOptions extends NatsOptions {
  /** Requests go through a JetStream work queue: stored, redelivered after a worker dies, one reply each. */
  durable: true;
  /** listen only: the workers' shared durable consumer (default 'procwire'). */
  queue?: string;
  /** Stream name (default 'PROCWIRE_' + subject with '.' as '_'). */
  stream?: string;
  /** Stream storage (default 'file'). */
  storage?: 'file' | 'memory';
  /** Stream replicas (default 3 on a cluster, 1 on a single server). */
  replicas?: number;
  /** ms a worker may hold a request without a progress ack before it goes to another worker (default 30000). */
  ackWait?: number;
  /** ms within which a request or reply published twice under the same id is stored once (default 120000). */
  duplicateWindow?: number;
  /** ms after which an unread request or reply leaves the stream (default 3600000). */
  maxAge?: number;
  /** listen only: requests one worker takes from the queue and runs at once; it asks for no more (default 16). */
  concurrency?: number;
  /** listen only: requests out at all workers at once, unacked (default 1024). */
  maxAckPending?: number;
  /** connect only: ms after which the server drops a gone caller's reply consumer (default 60000). */
  callerIdle?: number;
}

/** What a durable NATS channel's stats() adds. */
export interface DurableStats {
  /** Requests this worker got after another worker had held them. */
  redeliveries: number;
  /** Second replies to one request, dropped (by the stream, counted by the worker; or by the caller). */
  duplicatesSuppressed: number;
  /** Replies to requests that had timed out or were cancelled. */
  lateReplies: number;
  /** Publishes tried again (lost acknowledgement, failover). */
  republished: number;
  /** Progress acks sent while a responder ran. */
  progressAcks: number;
  /** Requests cancelled (timeout, abort). */
  cancelled: number;
}

/** The channel of a durable NATS listener (the worker's) or connect() (the caller's): requests only. */
export interface DurableChannel extends Channel {
  readonly subject: string;
  readonly stream: string;
  stats(): ChannelStats & DurableStats;
}

export interface SendOptions {
  /** Buffers/ArrayBuffers handed over: detached here; zero-copy for procwire.alloc() buffers. */
  transfer?: ReadonlyArray<ArrayBuffer | ArrayBufferView>;
}

export interface RequestOptions {
  /** Milliseconds to wait for the reply (ERR_PROCWIRE_REQUEST_TIMEOUT). Default: the channel's requestTimeout (30000); 0: no limit. */
  timeout?: number;
  signal?: AbortSignal;
  /** NATS channels: resend a request that timed out, up to this many times (at-least-once). */
  retries?: number;
  retryDelay?: number;
}

/**
 * One class for every transport. Made by fork(), listen(), connect() and
 * parent; not constructible from user code (the constructor throws a coded
 * error), but usable with `instanceof` and as a type.
 *
 * `In` is what this end receives (messages, and the requests its responder
 * answers), `Out` what it sends; both default to `any`. A typed channel is a
 * type only: nothing is checked at run time.
 */
export declare class Channel<In = any, Out = any> extends EventEmitter {
  private constructor();
  readonly serialization: Serialization;
  readonly maxMessageSize: number;
  readonly highWaterMark: number;
  readonly maxQueuedBytes: number;
  readonly requestTimeout: number;
  /** Requests answered by respond() at once (see ChannelOptions). */
  readonly maxConcurrentRequests: number;
  readonly transport: 'fork' | 'unix' | 'tcp' | 'tls' | 'nats' | 'socket';
  /** Unix peers: from SO_PEERCRED. fork: the child's pid. */
  readonly peer: { pid?: number; uid?: number; gid?: number; mode?: string } | null;
  readonly connected: boolean;
  readonly closed: boolean;
  readonly writableLength: number;
  readonly writableNeedDrain: boolean;
  send(message: Out, callback?: (err: Error | null) => void): boolean;
  send(message: Out, options: SendOptions, callback?: (err: Error | null) => void): boolean;
  /** handle: net.Socket, net.Server or dgram.Socket (fork and named unix channels only). */
  send(message: Out, handle: SendHandle | null | undefined, callback?: (err: Error | null) => void): boolean;
  send(message: Out, handle: SendHandle | null | undefined, options: (SendOptions & { keepOpen?: boolean }) | undefined, callback?: (err: Error | null) => void): boolean;
  /** Resolves with the peer responder's answer, typed `Res` (the channel's `In` unless given). */
  request<Res = In>(value: Out, options?: RequestOptions): Promise<Res>;
  respond(handler: ((value: In, channel: Channel<In, Out>) => unknown) | null): this;
  close(): void;
  destroy(err?: Error): void;
  disconnect(): void;
  ref(): this;
  unref(): this;
  pause(): this;
  resume(): this;
  stats(): ChannelStats | null;

  on(event: 'messageerror', listener: (err: ProcwireError) => void): this;
  on(event: 'message', listener: (message: In, handle?: SendHandle) => void): this;
  on(event: 'internalMessage', listener: (message: any, handle?: unknown) => void): this;
  on(event: 'drain' | 'connect' | 'disconnect', listener: () => void): this;
  on(event: 'close', listener: (reason: CloseReason, err?: ProcwireError) => void): this;
  on(event: 'error', listener: (err: ProcwireError) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

/** What send() can pass beside a message, as child_process. */
export type SendHandle = import('node:net').Socket | import('node:net').Server | import('node:dgram').Socket;

export interface ProcwireForkOptions extends ForkOptions, ChannelOptions {
  /**
   * 'native' (default where possible): an unmodified child, its process.send/on('message')/
   *   channel/disconnect served by procwire's native channel (a preload). The default falls back
   *   to 'node' on the JS fallback, with another execPath, or under the permission model; cluster
   *   workers keep 'node'.
   * 'node': plain Node child using process.send, Node's IPC in the child.
   * 'procwire': the child uses require('procwire').parent.
   */
  child?: 'node' | 'native' | 'procwire';
}

export interface ProcwireChildProcess<In = any, Out = any> extends ChildProcess {
  /** The procwire Channel (with fd, ref(), unref(), request, stats); null once disconnected, as Node's. */
  channel: (Channel<In, Out> & { readonly fd: number | undefined }) | null;
  /** Handles sent but not yet acknowledged, and what waits behind them (Node's). */
  _handleQueue: unknown[] | null;
  // child_process's forms, and procwire's options ({ transfer }) beside a handle or null. The
  // message stays untyped here, as ChildProcess has it; child.channel.send() checks `Out`.
  send(message: unknown, callback?: (error: Error | null) => void): boolean;
  send(message: unknown, sendHandle?: SendHandle | null, callback?: (error: Error | null) => void): boolean;
  send(message: unknown, sendHandle: SendHandle | null | undefined, options: (SendOptions & { keepOpen?: boolean }) | undefined, callback?: (error: Error | null) => void): boolean;
  send(message: unknown, options: SendOptions, callback?: (error: Error | null) => void): boolean;
  request<Res = In>(value: Out, options?: RequestOptions): Promise<Res>;
  respond(handler: ((value: In, channel: Channel<In, Out>) => unknown) | null): Channel<In, Out>;
}

/**
 * child_process.fork with the parent's end of the channel run natively: same
 * arguments, checks, errors and defaults (serialization 'json'), handles included.
 */
export declare function fork<In = any, Out = any>(modulePath: string | URL | Buffer, args?: readonly string[] | null, options?: ProcwireForkOptions): ProcwireChildProcess<In, Out>;
export declare function fork<In = any, Out = any>(modulePath: string | URL | Buffer, options?: ProcwireForkOptions): ProcwireChildProcess<In, Out>;

/**
 * Node's cluster module whose primary forks workers through procwire.fork.
 * Read it before anything loads 'cluster' (ERR_PROCWIRE_CLUSTER_LOADED otherwise).
 */
export declare const cluster: import('node:cluster').Cluster;
/** The same as `cluster`, as a function (the ESM entry exports this one, not `cluster`). */
export declare function getCluster(): import('node:cluster').Cluster;

/** A name (private dir), a socket path, { path }, { name, abstract: true }, or { port, host }. */
export type Address = string | { path: string } | { name: string; abstract?: boolean } | { port: number; host?: string };

export interface AuthOptions {
  /** Shared secret (16+ bytes) for the HMAC hello; defaults to PROCWIRE_SECRET, or the key file beside a named socket. */
  secret?: string | Buffer;
  /** false: no handshake (explicitly insecure). */
  auth?: boolean;
  /** Milliseconds the peer has to complete the hello. Default 5000. */
  helloTimeout?: number;
  /** TCP only: node:tls options (server: key/cert; client: ca, servername, ...). */
  tls?: import('node:tls').TlsOptions & import('node:tls').ConnectionOptions;
}

export interface ListenOptions extends ChannelOptions, AuthOptions {
  backlog?: number;
  /**
   * Connections waiting for their hello at once (default 128); past it the one that has waited
   * longest is closed and reported as 'reject'.
   */
  maxPendingHellos?: number;
  /** Unix sockets: peer uids allowed (SO_PEERCRED). Default: this process's uid only. '*' allows all. */
  allowUids?: number[] | '*';
}

/** server.address() of a unix socket server. */
export interface UnixServerAddress { path: string; abstract: boolean }
/** server.address() of a TCP (or TLS) server, with the real port for `port: 0`. */
export interface TcpServerAddress { host: string; port: number }
/** server.address() of a NATS server. */
export interface NatsServerAddress { servers: string[]; subject: string; queue: string }
export type ServerAddress = UnixServerAddress | TcpServerAddress | NatsServerAddress;

/**
 * What listen() returns; not constructible from user code. `A` is what address()
 * returns: listen() picks it from the address it was given.
 */
export declare class Server<A extends ServerAddress = ServerAddress> extends EventEmitter {
  private constructor();
  readonly channels: Set<Channel>;
  /**
   * Resolves once the server listens; rejects with the listen error where binding is
   * asynchronous (a host name, TLS, or any address under the JS fallback).
   */
  readonly ready: Promise<Server<A>>;
  address(): A;
  close(callback?: () => void): this;
  ref(): this;
  unref(): this;
  on(event: 'channel', listener: (channel: Channel) => void): this;
  on(event: 'reject', listener: (err: ProcwireError) => void): this;
  on(event: 'listening' | 'close', listener: () => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

export declare function listen(url: `nats://${string}`, options: DurableNatsOptions, onChannel?: (channel: DurableChannel) => void): Server<NatsServerAddress>;
export declare function listen(url: `nats://${string}`, options: NatsOptions, onChannel?: (channel: Channel) => void): Server<NatsServerAddress>;
export declare function listen(address: { port: number; host?: string }, onChannel?: (channel: Channel) => void): Server<TcpServerAddress>;
export declare function listen(address: { port: number; host?: string }, options: ListenOptions, onChannel?: (channel: Channel) => void): Server<TcpServerAddress>;
export declare function listen(address: string | { path: string } | { name: string; abstract?: boolean }, onChannel?: (channel: Channel) => void): Server<UnixServerAddress>;
export declare function listen(address: string | { path: string } | { name: string; abstract?: boolean }, options: ListenOptions, onChannel?: (channel: Channel) => void): Server<UnixServerAddress>;
/** Any address, a nats:// URL in a plain string included. */
export declare function listen(address: Address, options?: ListenOptions | NatsOptions | DurableNatsOptions, onChannel?: (channel: Channel) => void): Server;
export declare function connect(url: `nats://${string}`, options: DurableNatsOptions): Promise<DurableChannel>;
export declare function connect<In = any, Out = any>(url: `nats://${string}`, options: NatsOptions): Promise<Channel<In, Out>>;
export declare function connect<In = any, Out = any>(address: Address, options?: (ChannelOptions & AuthOptions) | NatsOptions | DurableNatsOptions): Promise<Channel<In, Out>>;

/**
 * The child's end of a fork(..., { child: 'procwire' }) channel, or null.
 * It keeps the process alive only while it has 'message'/'disconnect'
 * listeners, a responder, or requests in flight.
 */
export declare const parent: Channel | null;
/** The same as `parent`, as a function (made on first call). */
export declare function getParent(): Channel | null;
/**
 * `parent`, or an ERR_PROCWIRE_NO_PARENT error saying how this process was started and that its
 * parent must fork it with `{ child: 'procwire' }`. For a child script that needs its parent;
 * `if (procwire.parent)` stays the way to ask whether there is one.
 */
export declare function requireParent<In = any, Out = any>(): Channel<In, Out>;
/** A Buffer over a shared-memory segment, for zero-copy send(message, { transfer: [buf] }). */
export declare function alloc(size: number): Buffer;
/**
 * Hands a received Buffer's recycled shared-memory segment (segmentPool) back to its sender now
 * instead of when the Buffer is collected; the Buffer and every view of its ArrayBuffer become
 * empty. Returns false, doing nothing, for any other buffer.
 */
export declare function release(view: ArrayBuffer | ArrayBufferView): boolean;
/** true when the native addon is in use. */
export declare const native: boolean;

/** Options of `new Pool()` (docs/pool.md), with piscina's names where piscina has one. */
export interface PoolOptions {
  /** The worker's module: a path (relative to the working directory) or a file: URL. */
  filename: string | URL;
  /** Workers forked ahead and kept ready. Default: half the CPUs (at least 1). */
  minWorkers?: number;
  /** The most workers at once. Default: the CPUs (at least minWorkers). */
  maxWorkers?: number;
  /** ms a worker above minWorkers may stay idle before it exits. Default 10000. */
  idleTimeout?: number;
  /** Tasks one worker holds at once. Default 1. */
  concurrentTasksPerWorker?: number;
  /**
   * Tasks that may wait, beyond those the workers not ready yet will take; past it run() rejects
   * ERR_PROCWIRE_POOL_QUEUE_FULL. 0: no queue. 'auto': maxWorkers². Default Infinity.
   */
  maxQueue?: number | 'auto';
  /** A task's default timeout in ms; 0: none (the default). */
  timeout?: number;
  /** ms an aborted or timed-out running task has to stop before its worker is killed. Default 1000. */
  abortGracePeriod?: number;
  execArgv?: string[];
  /** The Node binary the workers run. Default process.execPath. */
  execPath?: string;
  env?: NodeJS.ProcessEnv;
  /** Default 'advanced' (structured clone, shared memory for large buffers). */
  serialization?: Serialization;
  resourceLimits?: { maxOldGenerationSizeMb?: number; maxYoungGenerationSizeMb?: number; stackSizeMb?: number };
  /** The handler run when a task names none. Default 'default'. */
  name?: string;
}

/** `pool.options`: the pool's settings, defaults filled in (the workers' execArgv, execPath, env and resourceLimits aside). */
export interface PoolSettings {
  /** The worker's module, an absolute path. */
  filename: string;
  minWorkers: number;
  maxWorkers: number;
  idleTimeout: number;
  concurrentTasksPerWorker: number;
  /** Infinity when unbounded; 'auto' is maxWorkers². */
  maxQueue: number;
  timeout: number;
  abortGracePeriod: number;
  serialization: Serialization;
  name: string;
}

export interface RunOptions {
  /** The named handler of the worker's module to run. */
  name?: string;
  signal?: AbortSignal;
  /** Buffers handed over, not copied (procwire.alloc() ones without a byte copied). */
  transfer?: (ArrayBuffer | ArrayBufferView)[];
  /** piscina's name for `transfer` (buffers only: no MessagePort); give one or the other. */
  transferList?: (ArrayBuffer | ArrayBufferView)[];
  /** ms from run() until the task is rejected with ERR_PROCWIRE_TASK_TIMEOUT; 0: none. */
  timeout?: number;
}

export interface PoolHistogram {
  count: number;
  min: number;
  max: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
}

export interface PoolWorkerInfo {
  pid: number;
  state: 'starting' | 'ready' | 'retiring' | 'dead';
  running: number;
  completed: number;
}

export interface PoolStats {
  completed: number;
  failed: number;
  cancelled: number;
  queued: number;
  running: number;
  workers: PoolWorkerInfo[];
  /** ms from a task's dispatch to its result. */
  runTime: PoolHistogram;
  /** ms from run() to dispatch, for tasks written to their worker. */
  waitTime: PoolHistogram;
  /** The share of maxWorkers' time spent with at least one task, 0..1. */
  utilization: number;
  /** ms since the pool was made. */
  duration: number;
}

/** What Pool.move() returns: a value whose buffers run() (or a worker's result) transfers. */
export interface Moved<T> {
  readonly value: T;
  readonly transfer: (ArrayBuffer | ArrayBufferView)[];
}

/** A pool of procwire worker processes running one module's handlers (docs/pool.md). */
export declare class Pool<Task = any, Result = any> extends EventEmitter {
  constructor(options: PoolOptions);
  /** Marks a value whose buffers are handed over rather than copied. */
  static move<T>(value: T, transfer?: (ArrayBuffer | ArrayBufferView)[]): Moved<T>;
  run(task: Task | Moved<Task>, options?: RunOptions): Promise<Result>;
  /**
   * Finishes queued and running tasks, then lets the workers go. `force: true` rejects the queued
   * tasks (ERR_PROCWIRE_POOL_CLOSED) instead of running them, as piscina's.
   */
  close(options?: { force?: boolean }): Promise<void>;
  /** Rejects queued and running tasks (ERR_PROCWIRE_POOL_CLOSED) and kills the workers. */
  destroy(): Promise<void>;
  /** `await using pool = new Pool(...)`: close() at the scope's end, as piscina's. */
  [Symbol.asyncDispose](): Promise<void>;
  stats(): PoolStats;
  readonly queueSize: number;
  readonly completed: number;
  /** run() would refuse a task now; 'drain' follows once it would not. */
  readonly needsDrain: boolean;
  readonly workers: PoolWorkerInfo[];
  readonly options: PoolSettings;
  on(event: 'drain', listener: () => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}
