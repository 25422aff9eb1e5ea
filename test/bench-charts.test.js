'use strict';
// The bench's charts (bench/report.js toSvg) stay legible: legend text wraps
// inside its own panel instead of running into the next panel's legend
// (roundtrip's skipped peers did) or being cut with "…" (bulk's long
// labels were), and a suite whose x values are unrelated categories (the
// codec's message shapes) draws points, not lines joining them. Synthetic
// results, rendered by the real report code; the text width is estimated at
// 6.1 px a character, the legend's font at 11 px.

const test = require('node:test');
const assert = require('node:assert');
const { toSvg } = require('../bench/report');

const CHAR_PX = 6.1;

function suite({ peers, categorical = false, name = 'roundtrip' }) {
  const xs = [64, 1024, 65536];
  const data = {};
  for (const p of peers) {
    if (p.status !== 'ok') continue;
    data[p.id] = {};
    xs.forEach((x, k) => { data[p.id][x] = { rate: { median: 1000 * (k + 1), samples: [900 * (k + 1), 1100 * (k + 1)] } }; });
  }
  return {
    name, title: 'synthetic', xs, xLabel: 'message', xUnit: 'bytes', categorical, repeats: 3,
    metrics: [{ id: 'rate', label: 'messages/s', unit: '/s', better: 'higher' }],
    peers, data, ratioTo: [peers[0].id],
  };
}

// Every text element of the legends (font-size 11, not anchored): where it
// starts, and its estimated right edge.
function legendTexts(svg) {
  return [...svg.matchAll(/<text x="([0-9.]+)" y="([0-9.]+)" font-size="11"(?! text-anchor)[^>]*>([^<]*)<\/text>/g)]
    .map((m) => ({ x: Number(m[1]), y: Number(m[2]), text: m[3].replace(/&[a-z]+;/g, 'x') }));
}

test('legend lines of a two-column chart stay inside their panel, and nothing is cut', () => {
  const long = 'a peer label long enough to need more than one line in a half-width panel of the chart';
  const peers = [];
  for (let i = 0; i < 8; i++) peers.push({ id: `p${i}`, label: `${long} ${i}`, status: 'ok' });
  peers.push({ id: 'skip1', label: 'Node 26 fork IPC, advanced', status: 'skipped',
    reason: 'Node 26 is not installed here: install it with your version manager and set PROCWIRE_BENCH_NODE26 to its node binary' });
  const svg = toSvg(suite({ peers }));
  const width = Number(/width="(\d+)"/.exec(svg)[1]);
  const texts = legendTexts(svg);
  assert.ok(texts.length > peers.length, 'long labels wrap onto more lines');
  for (const t of texts) {
    const right = t.x < width / 2 ? width / 2 : width;
    assert.ok(t.x + t.text.length * CHAR_PX <= right, `"${t.text}" at x=${t.x} runs past ${right}`);
    assert.ok(!t.text.includes('…'), `"${t.text}" is cut`);
  }
  // Lines of one panel's legend never share a baseline with each other.
  const left = texts.filter((t) => t.x < width / 2).map((t) => t.y);
  assert.strictEqual(new Set(left).size, left.length);
  const height = Number(/height="(\d+)"/.exec(svg)[1]);
  assert.ok(Math.max(...texts.map((t) => t.y)) < height, 'the legend fits in the image');
});

test('a categorical suite (message shapes) draws points without lines; a size axis draws lines', () => {
  const peers = [{ id: 'a', label: 'one', status: 'ok' }, { id: 'b', label: 'two', status: 'ok' }];
  const series = (svg) => (svg.match(/<path d="M[^"]*" fill="none" stroke="#[0-9A-F]+" stroke-width="(?:1\.6|2\.8)"\/>/g) || []).length;
  assert.strictEqual(series(toSvg(suite({ peers, categorical: true, name: 'codec' }))), 0);
  assert.strictEqual(series(toSvg(suite({ peers }))), 2);
});
