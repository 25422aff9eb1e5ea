'use strict';
// A procwire parent with a plain Node child against Node's own parent, in
// both wire formats, from 64 B to 1 MiB: the swap-one-line case, where only
// the parent's end is procwire's. The same echo as the roundtrip suite
// ({ payload: '.'.repeat(len) }, the child sends each message back), with
// 16 messages in flight so that the 1 MiB runs stay within memory and time.
//
//   node bench/parity.js [--quick]      (or: procwire bench --suite parity)

const IN_FLIGHT = 16;
const SIZES_FULL = [64, 1024, 16384, 65536, 262144, 1048576];
const SIZES_QUICK = [64, 16384, 262144, 1048576];

const PEERS = [
  { id: 'procwire-plain-json', label: 'procwire parent + plain child, json' },
  { id: 'node-json', label: 'Node parent + plain child, json' },
  { id: 'procwire-plain-advanced', label: 'procwire parent + plain child, advanced' },
  { id: 'node-advanced', label: 'Node parent + plain child, advanced' },
];

async function plan({ quick, repeats }) {
  const sizes = quick ? SIZES_QUICK : SIZES_FULL;
  // 1 MiB json round trips run at about 50/s here: a window must hold a
  // couple of dozen of them.
  const warmMs = quick ? 100 : 500;
  const windowMs = quick ? 320 : 1500;
  return {
    name: 'parity',
    title: `Plain child: procwire parent against Node's parent (${IN_FLIGHT} in flight, child echoes)`,
    description: "An unmodified Node child echoing { payload: '.'.repeat(len) } to a procwire parent and to Node's " +
      'own parent, in each wire format. Higher is better; a ratio under ×1 means the procwire parent is slower.',
    script: require.resolve('./roundtrip'),
    xs: sizes,
    xLabel: 'payload',
    xUnit: 'bytes',
    // The child bounds the rate at the larger sizes (it parses and writes
    // every message, as Node's parent does): the parent's own CPU time per
    // round trip shows the parent's work where the rate cannot.
    metrics: [{ id: 'rps', label: 'round trips/s', unit: '/s', better: 'higher' },
      { id: 'cpu', label: 'parent CPU per round trip', unit: 'µs', better: 'lower' }],
    peers: PEERS.map((p) => ({ ...p })),
    repeats: repeats || (quick ? 3 : 5),
    ticksPerRun: sizes.length,
    timeoutMs: 20000 + sizes.length * (warmMs + windowMs + 6000),
    config: () => ({ sizes, warmMs, windowMs, inFlight: IN_FLIGHT,
      hardLimitMs: 15000 + sizes.length * (warmMs + windowMs + 6000) }),
    ratioTo: ['procwire-plain-json', 'node-json', 'node-advanced'],
    pairs: [['procwire-plain-json', 'node-json'], ['procwire-plain-advanced', 'node-advanced']],
    notes: [`${IN_FLIGHT} messages in flight; the child is plain Node (process.on('message') -> process.send).`,
      'procwire rows: procwire.fork(..., { child: "node" }); Node rows: child_process.fork.'],
  };
}

module.exports = { name: 'parity', inProcess: false, plan };

if (require.main === module) {
  require('./lib/cli').standalone('parity');
}
