'use strict';
// The far end of every conformance test, run in its own process. The same
// script plays each transport's peer:
//   plain     a plain Node child: built-in process.send / on('message') only
//   procwire  a procwire child: require('procwire').parent
//   named     an unrelated process: procwire.connect(<socket name>)
//   tcp       an unrelated process: procwire.connect({ port })
//   tls       the same over TLS (the shipped self-signed test certificate)
//   nats      an unrelated process: procwire.connect(<nats url>, { subject, natsClient })
// (The fallback transport is `named` with PROCWIRE_FORCE_FALLBACK=1.)
// It echoes objects, counts number streams, floods on request, and answers
// requests. A plain child answers procwire requests by hand through Node's
// 'internalMessage' event, which shows the request protocol is plain Node
// messages.

const path = require('path');

const [mode, target, subject, natsClient] = process.argv.slice(2);

function busyWait(ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) { /* simulate a slow consumer */ }
}

function makeLogic(send, close) {
  let expected = 0;
  let bad = 0;
  let slow = 0;
  return (m) => {
    if (typeof m === 'number') {
      if (m !== expected) bad++;
      expected++;
      if (slow && expected % slow === 0) busyWait(20);
      return;
    }
    switch (m && m.op) {
      case 'count-start': expected = 0; bad = 0; slow = m.slow || 0; break;
      case 'count-end': send({ op: 'count-result', count: expected, bad }); break;
      case 'flood': {
        for (let i = 0; i < m.n; i++) send(i);
        if (m.close) close();
        break;
      }
      case 'exit': process.exit(m.code || 0); break;
      default: send(m);
    }
  };
}

async function main() {
  if (mode === 'plain') {
    const send = (m) => process.send(m);
    process.on('message', makeLogic(send, () => process.disconnect()));
    process.on('internalMessage', (m) => {
      if (m && m.cmd === 'NODE_PROCWIRE_REQ') {
        if (m.body && m.body.fail) {
          process.send({ cmd: 'NODE_PROCWIRE_RES', id: m.id, ok: false, error: { name: 'Error', message: 'boom' } });
        } else {
          process.send({ cmd: 'NODE_PROCWIRE_RES', id: m.id, ok: true, body: { echo: m.body } });
        }
      }
    });
    return;
  }
  const procwire = require(path.join(__dirname, '..', '..'));
  let channel;
  if (mode === 'procwire') channel = procwire.parent;
  else if (mode === 'named') channel = await procwire.connect(target);
  else if (mode === 'tcp') channel = await procwire.connect({ port: Number(target), host: '127.0.0.1' });
  else if (mode === 'tls') {
    const { cert } = require(path.join(__dirname, '..', '..', 'bench', 'lib', 'test-cert'));
    channel = await procwire.connect({ port: Number(target), host: '127.0.0.1' }, { tls: { ca: cert } });
  } else if (mode === 'nats') channel = await procwire.connect(target, { subject, heartbeat: 1000, natsClient });
  else throw new Error(`unknown mode ${mode}`);
  channel.on('message', makeLogic((m) => channel.send(m), () => channel.close()));
  channel.respond(async (v) => {
    if (v && v.fail) throw Object.assign(new Error('boom'), { code: 'E_BOOM' });
    if (v && v.delay) await new Promise((r) => setTimeout(r, v.delay));
    return { echo: v };
  });
  // Named, TCP, TLS and NATS peers have no parent to outlive: end with the channel.
  channel.on('close', () => process.exit(0));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
