'use strict';
// send() with a message whose queued copy cannot be allocated: a coded error
// (ERR_PROCWIRE_OUT_OF_MEMORY), nothing queued, and the process and the
// channel live on. The child re-runs this file and caps its own address
// space with prlimit, so that the copy's allocation really fails.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const fs = require('fs');

const MiB = 1 << 20;
const DATA_BYTES = 192 * MiB;

function vmSizeBytes() {
  const line = fs.readFileSync('/proc/self/status', 'utf8').split('\n').find((l) => l.startsWith('VmSize:'));
  return Number(line.split(/\s+/)[1]) * 1024;
}

// The child's room above what it has mapped: 'queue' leaves room for the
// encoder's own copy of the frame and not for the addon's copy of it as
// well; 'encoder' leaves too little for the encoder's copy itself.
const ROOM = { queue: DATA_BYTES + 96 * MiB, encoder: 32 * MiB };

if (process.argv[2] === 'child') {
  const { once } = require('events');
  const { namedPair } = require('./helpers/pair');
  (async () => {
    const p = await namedPair({ auth: false, rings: 'never', outOfLine: 'never', maxMessageSize: 512 * MiB });
    const data = Buffer.alloc(DATA_BYTES, 7);
    const limit = vmSizeBytes() + ROOM[process.argv[3]];
    childProcess.execFileSync('prlimit', ['--pid', String(process.pid), `--as=${limit}`]);
    let code = null;
    try {
      p.client.send({ data });
    } catch (err) {
      code = err.code;
    }
    // Nothing was queued, and the channel still carries messages.
    const queued = p.client.writableLength;
    p.client.send({ after: true });
    const [m] = await once(p.serverSide, 'message');
    process.stdout.write(JSON.stringify({ code, queued, after: m.after === true }));
    p.close();
  })().catch((err) => {
    process.stdout.write(JSON.stringify({ failed: String(err && err.stack) }));
  });
  return;
}

function sendWithRoom(room) {
  const r = childProcess.spawnSync(process.execPath, [__filename, 'child', room], { encoding: 'utf8', timeout: 50_000 });
  assert.strictEqual(r.signal, null, `the child died of ${r.signal}: ${r.stderr}`);
  assert.strictEqual(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test('a message whose queued copy cannot be allocated throws ERR_PROCWIRE_OUT_OF_MEMORY; nothing is lost, nothing aborts', { timeout: 60_000 }, () => {
  assert.deepStrictEqual(sendWithRoom('queue'), { code: 'ERR_PROCWIRE_OUT_OF_MEMORY', queued: 0, after: true });
});

// V8 reports a serializer buffer it could not grow as a clone error: the
// value was fine, so it is the same out-of-memory code, not "unserializable".
test('a message the encoder has no memory for throws ERR_PROCWIRE_OUT_OF_MEMORY too; nothing is lost, nothing aborts', { timeout: 60_000 }, () => {
  assert.deepStrictEqual(sendWithRoom('encoder'), { code: 'ERR_PROCWIRE_OUT_OF_MEMORY', queued: 0, after: true });
});
