'use strict';
// A minimal Redis (RESP2) client over net, just enough for pub/sub, and the
// lifecycle of the private redis-server the bench starts: a unix socket in a
// temp dir, no TCP port (port 0), no persistence, stopped by pid.

const childProcess = require('child_process');
const fs = require('fs');
const net = require('net');
const path = require('path');

// Incremental RESP reader: feed chunks, get whole replies.
class RespReader {
  constructor(onReply) {
    this.onReply = onReply;
    this.buf = Buffer.alloc(0);
  }

  feed(chunk) {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    let off = 0;
    for (;;) {
      const r = this.parse(off);
      if (r === null) break;
      off = r.next;
      this.onReply(r.value);
    }
    this.buf = off === this.buf.length ? Buffer.alloc(0) : this.buf.subarray(off);
  }

  // -> { value, next } or null if incomplete.
  parse(off) {
    const buf = this.buf;
    if (off >= buf.length) return null;
    const eol = buf.indexOf('\r\n', off);
    if (eol < 0) return null;
    const type = buf[off];
    const line = buf.toString('latin1', off + 1, eol);
    switch (type) {
      case 0x2b: return { value: line, next: eol + 2 };                 // +simple
      case 0x2d: return { value: new Error(line), next: eol + 2 };      // -error
      case 0x3a: return { value: Number(line), next: eol + 2 };         // :integer
      case 0x24: {                                                      // $bulk
        const len = Number(line);
        if (len < 0) return { value: null, next: eol + 2 };
        const end = eol + 2 + len;
        if (end + 2 > buf.length) return null;
        return { value: buf.toString('utf8', eol + 2, end), next: end + 2 };
      }
      case 0x2a: {                                                      // *array
        const n = Number(line);
        if (n < 0) return { value: null, next: eol + 2 };
        const items = [];
        let next = eol + 2;
        for (let i = 0; i < n; i++) {
          const r = this.parse(next);
          if (r === null) return null;
          items.push(r.value);
          next = r.next;
        }
        return { value: items, next };
      }
      default:
        throw new Error(`RESP: unexpected type byte 0x${type.toString(16)}`);
    }
  }
}

function command(...args) {
  let s = `*${args.length}\r\n`;
  for (const a of args) {
    const v = String(a);
    s += `$${Buffer.byteLength(v)}\r\n${v}\r\n`;
  }
  return s;
}

class RespClient {
  static connect(socketPath) {
    return new Promise((resolve, reject) => {
      const socket = net.connect(socketPath);
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.removeListener('error', reject);
        resolve(new RespClient(socket));
      });
    });
  }

  constructor(socket) {
    this.socket = socket;
    this.pending = [];        // callbacks for ordinary replies, in order
    this.handlers = new Map(); // channel -> onMessage (subscriber mode)
    this.subscribed = false;
    socket.setNoDelay(true);
    socket.on('error', () => {});
    const reader = new RespReader((reply) => this.onReply(reply));
    socket.on('data', (chunk) => reader.feed(chunk));
  }

  onReply(reply) {
    if (this.subscribed && Array.isArray(reply) && reply[0] === 'message') {
      const h = this.handlers.get(reply[1]);
      if (h) h(reply[2]);
      return;
    }
    const cb = this.pending.shift();
    if (cb) cb(reply);
  }

  call(...args) {
    return new Promise((resolve, reject) => {
      this.pending.push((reply) => (reply instanceof Error ? reject(reply) : resolve(reply)));
      this.socket.write(command(...args));
    });
  }

  subscribe(channel, onMessage) {
    this.subscribed = true;
    this.handlers.set(channel, onMessage);
    return this.call('SUBSCRIBE', channel);
  }

  // Fire and forget: the integer replies are read and dropped.
  publish(channel, text) {
    this.pending.push(noop);
    return this.socket.write(`*3\r\n$7\r\nPUBLISH\r\n$${Buffer.byteLength(channel)}\r\n${channel}\r\n` +
      `$${Buffer.byteLength(text)}\r\n${text}\r\n`);
  }

  close() {
    this.socket.destroy();
  }
}

function noop() {}

function findRedisServer() {
  const dirs = (process.env.PATH || '').split(':').concat(['/usr/bin', '/usr/sbin', '/usr/local/bin']);
  for (const d of dirs) {
    const f = path.join(d, 'redis-server');
    try {
      fs.accessSync(f, fs.constants.X_OK);
      return f;
    } catch { /* next */ }
  }
  return null;
}

// Tries the Debian package when allowed (root, and CI or PROCWIRE_BENCH_APT=1).
function tryInstallRedis(log) {
  const allowed = process.getuid && process.getuid() === 0 && (process.env.CI || process.env.PROCWIRE_BENCH_APT === '1');
  if (!allowed) return null;
  log('redis-server not found; trying apt-get install -y redis-server ...');
  const opts = { stdio: 'ignore', timeout: 180000, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } };
  childProcess.spawnSync('apt-get', ['update'], opts);
  childProcess.spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'redis-server'], opts);
  return findRedisServer();
}

// Starts redis-server on <dir>/redis.sock. Resolves { socket, pid, stop() } or
// { skip: reason }. trackPid/untrackPid register the pid for emergency clean-up.
async function startRedis(dir, { log = () => {}, trackPid = () => {}, untrackPid = () => {} } = {}) {
  let bin = findRedisServer();
  if (!bin) bin = tryInstallRedis(log);
  if (!bin) {
    return { skip: 'redis-server is not installed (Debian: apt-get install redis-server; set PROCWIRE_BENCH_APT=1 to let the bench try as root)' };
  }
  const socket = path.join(dir, 'redis.sock');
  const proc = childProcess.spawn(bin, [
    '--port', '0', '--unixsocket', socket, '--unixsocketperm', '700',
    '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no',
    '--client-output-buffer-limit', 'pubsub 0 0 0', '--logfile', path.join(dir, 'redis.log'),
  ], { stdio: 'ignore', detached: true });
  trackPid(proc.pid);
  const server = require('./servers').stopper(proc, () => untrackPid(proc.pid));
  const stop = server.stop;
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline && !server.exited()) {
    try {
      const c = await RespClient.connect(socket);
      const pong = await c.call('PING');
      c.close();
      if (pong === 'PONG') return { socket, pid: proc.pid, stop };
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  await stop();
  let why = server.exited() ? 'it exited' : 'no PONG within 10 s';
  try { why += `: ${fs.readFileSync(path.join(dir, 'redis.log'), 'utf8').trim().split('\n').slice(-2).join(' / ')}`; } catch { /* no log */ }
  return { skip: `redis-server did not start (${why})` };
}

module.exports = { RespClient, RespReader, startRedis, findRedisServer, command };
