'use strict';
// Turns a bench run into files: results.json (everything, with every sample),
// results.md (Markdown tables: values, ratios to procwire and to Node's
// built-in modes, message-size histograms) and one hand-written SVG chart per
// suite (log-scale axes: sizes span decades; see toSvg).

const fs = require('fs');
const path = require('path');
const { fmtNum, fmtSize } = require('./lib/harness');

// ---- helpers -----------------------------------------------------------------

function peerLabel(suite, id) {
  const p = suite.peers.find((q) => q.id === id);
  return p ? p.label : id;
}

function value(suite, peerId, x, metric) {
  const d = suite.data && suite.data[peerId] && suite.data[peerId][x] && suite.data[peerId][x][metric];
  return d ? d.median : NaN;
}

function fmtX(suite, x) {
  return suite.xUnit === 'bytes' ? fmtSize(Number(x)) : String(x);
}

function fmtValue(v, metric) {
  if (!Number.isFinite(v)) return '—';
  if (metric.unit === '%') return `${v.toFixed(0)}%`;
  if (metric.unit === 'µs') {
    if (v >= 1e5) return `${(v / 1000).toFixed(0)} ms`;
    if (v >= 1e3) return `${(v / 1000).toFixed(v >= 1e4 ? 1 : 2)} ms`;
    if (v >= 100) return v.toFixed(0);
    return v.toFixed(1);
  }
  return fmtNum(v);
}

// How many times `a` is better than `b` for this metric.
function advantage(a, b, metric) {
  if (!Number.isFinite(a) || !Number.isFinite(b) || a <= 0 || b <= 0) return NaN;
  return metric.better === 'lower' ? b / a : a / b;
}

function fmtRatio(r) {
  if (!Number.isFinite(r)) return '—';
  if (r >= 10) return `×${r.toFixed(0)}`;
  if (r >= 1) return `×${r.toFixed(2)}`;
  return `×${r.toFixed(2)}`;
}

function okPeers(suite) {
  return suite.peers.filter((p) => p.status === 'ok' && suite.data && suite.data[p.id]);
}

function mdEscape(s) {
  return String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

// ---- Markdown ------------------------------------------------------------------

function suiteMarkdown(suite) {
  const lines = [];
  lines.push(`### ${suite.title}`, '');
  if (suite.error) {
    lines.push(`Suite failed: ${mdEscape(suite.error)}`, '');
    return lines.join('\n');
  }
  if (suite.description) lines.push(suite.description, '');
  const peers = okPeers(suite);
  const head = `| ${suite.xLabel} → | ${suite.xs.map((x) => fmtX(suite, x)).join(' | ')} |`;
  const rule = `|---|${suite.xs.map(() => '---:').join('|')}|`;
  for (const metric of suite.metrics) {
    if (suite.metrics.length > 1) lines.push(`**${metric.label}** (${metric.better} is better)`, '');
    lines.push(head.replace(`${suite.xLabel} →`, `${metric.label}`), rule);
    for (const p of peers) {
      lines.push(`| ${mdEscape(p.label)} | ${suite.xs.map((x) => fmtValue(value(suite, p.id, x, metric.id), metric)).join(' | ')} |`);
    }
    lines.push('');
  }
  const primary = suite.metrics[0];
  const ref = (suite.ratioTo || [])[0];
  if (suite.pairs) {
    for (const metric of suite.metrics) {
      lines.push(`**Ratios** (${metric.label}, ${metric.better} is better; ×2 = twice as good)`, '');
      lines.push(head.replace(`${suite.xLabel} →`, 'ratio'), rule);
      for (const [a, b] of suite.pairs) {
        if (!peers.find((p) => p.id === a) || !peers.find((p) => p.id === b)) continue;
        lines.push(`| ${mdEscape(peerLabel(suite, a))} ÷ ${mdEscape(peerLabel(suite, b))} | ` +
          `${suite.xs.map((x) => fmtRatio(advantage(value(suite, a, x, metric.id), value(suite, b, x, metric.id), metric))).join(' | ')} |`);
      }
      lines.push('');
    }
  } else if (ref && peers.find((p) => p.id === ref)) {
    lines.push(`**${mdEscape(peerLabel(suite, ref))} compared with each peer** (${primary.label}; ×3 = procwire is 3 times as good, ×0.5 = half as good)`, '');
    lines.push(head.replace(`${suite.xLabel} →`, 'procwire ÷ peer'), rule);
    for (const p of peers) {
      if (p.id === ref) continue;
      lines.push(`| ${mdEscape(p.label)} | ${suite.xs.map((x) => fmtRatio(advantage(value(suite, ref, x, primary.id),
        value(suite, p.id, x, primary.id), primary))).join(' | ')} |`);
    }
    lines.push('');
    const builtins = (suite.ratioTo || []).slice(1).filter((id) => peers.find((p) => p.id === id));
    const procwirePeers = peers.filter((p) => p.id.startsWith('procwire'));
    if (builtins.length > 0 && procwirePeers.length > 0) {
      const names = builtins.map((id) => peerLabel(suite, id)).join(' or ');
      lines.push(`**procwire modes compared with the better Node built-in mode at each size** (${names})`, '');
      lines.push(head.replace(`${suite.xLabel} →`, 'procwire ÷ best built-in'), rule);
      for (const p of procwirePeers) {
        lines.push(`| ${mdEscape(p.label)} | ${suite.xs.map((x) => {
          let best = NaN;
          for (const b of builtins) {
            const v = value(suite, b, x, primary.id);
            if (!Number.isFinite(v)) continue;
            if (!Number.isFinite(best) || advantage(v, best, primary) > 1) best = v;
          }
          return fmtRatio(advantage(value(suite, p.id, x, primary.id), best, primary));
        }).join(' | ')} |`);
      }
      lines.push('');
      // Same wire format on both sides of the comparison (a plain child
      // does Node's own decoding, so this is the like-for-like view).
      const sameMode = procwirePeers.map((p) => [p, p.id.endsWith('-json') ? 'node-json' : 'node-advanced'])
        .filter(([, b]) => builtins.includes(b));
      if (sameMode.length > 0 && builtins.length > 1) {
        lines.push('**procwire modes compared with Node built-in IPC in the same serialization mode**', '');
        lines.push(head.replace(`${suite.xLabel} →`, 'procwire ÷ same-mode built-in'), rule);
        for (const [p, b] of sameMode) {
          lines.push(`| ${mdEscape(p.label)} ÷ ${mdEscape(peerLabel(suite, b))} | ${suite.xs.map((x) => fmtRatio(advantage(
            value(suite, p.id, x, primary.id), value(suite, b, x, primary.id), primary))).join(' | ')} |`);
        }
        lines.push('');
      }
    }
  }
  const skipped = suite.peers.filter((p) => p.status !== 'ok' || !(suite.data && suite.data[p.id]));
  for (const p of skipped) lines.push(`- ${p.status === 'skipped' ? 'Skipped' : 'Failed'}: ${mdEscape(p.label)}: ${mdEscape(p.reason || 'no result')}`);
  for (const p of peers) if (p.reason) lines.push(`- Note: ${mdEscape(p.label)}: ${mdEscape(p.reason)}`);
  for (const n of suite.notes || []) lines.push(`- ${n}`);
  if (suite.repeats) lines.push(`- Medians of ${suite.repeats} interleaved repeats${suite.seconds ? `; suite took ${suite.seconds.toFixed(0)} s` : ''}.`);
  lines.push('');
  return lines.join('\n');
}

// Chromium-style IPC.MessageSize view of one peer's channel histogram.
function histogramText(buckets, width = 40) {
  if (!buckets || buckets.length === 0) return '  (no messages)';
  const max = Math.max(...buckets.map((b) => b.count));
  const total = buckets.reduce((s, b) => s + b.count, 0);
  return buckets.map((b) => {
    const bar = '#'.repeat(Math.max(b.count > 0 ? 1 : 0, Math.round((b.count / max) * width)));
    const range = `${fmtBytesShort(b.min)}–${fmtBytesShort(b.max + 1)}`;
    return `  ${range.padStart(15)} ${String(b.count).padStart(10)} ${((b.count / total) * 100).toFixed(1).padStart(5)}% ${bar}`;
  }).join('\n');
}

function fmtBytesShort(n) {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / (1024 * 1024)}Mi`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024}Ki`;
  return String(n);
}

function histogramsMarkdown(results) {
  const out = [];
  for (const suite of Object.values(results.suites)) {
    const hs = suite.histograms || {};
    // The reference procwire peer only; `procwire stats results.json` prints them all.
    const ref = (suite.ratioTo || [])[0];
    const ids = Object.keys(hs).filter((id) => id === ref).concat(Object.keys(hs).filter((id) => id !== ref)).slice(0, 1);
    if (ids.length === 0) continue;
    out.push(`#### ${suite.name}`, '');
    for (const id of ids) {
      out.push(`${peerLabel(suite, id)}: messages sent by the bench side, all runs (frame bytes, log2 buckets)`, '',
        '```', histogramText(hs[id].out), '```', '');
    }
  }
  if (out.length === 0) return '';
  return ['## Message sizes (IPC.MessageSize-style histograms from channel.stats())', '',
    'Every peer\'s histograms: `procwire stats results.json`.', '', ...out].join('\n');
}

function toMarkdown(results) {
  const m = results.meta;
  const lines = [
    `# procwire bench — ${results.date}${m.quick ? ' (quick)' : ''}`,
    '',
    `Node ${m.node} on ${m.platform}/${m.arch}, ${m.cpus}× ${m.cpuModel}; procwire ${m.procwire}. ` +
      `Total ${m.seconds.toFixed(0)} s. Compare ratios within one run; absolute numbers drift between runs on shared VMs.`,
    '',
  ];
  for (const suite of Object.values(results.suites)) lines.push(suiteMarkdown(suite));
  const h = histogramsMarkdown(results);
  if (h) lines.push(h);
  return lines.join('\n');
}

// ---- SVG ------------------------------------------------------------------------
//
// One SVG per suite, made of panels (small multiples) that share their axes:
// a suite with many peers is split into groups of at most six series, so no
// plot is a tangle of look-alike lines; a suite charting two metrics (p50 and
// p98 latency) gets one row of panels per metric rather than dashed twins.
// Each point is the median of the repeats, with a min–max whisker across
// them. Peers that failed or were skipped are listed in their panel's legend
// as such, and a point a working peer could not measure is marked with ×
// on the axis.

// Okabe & Ito's colour-blind-safe palette (yellow left out: unreadable on
// white), one colour per peer for the whole chart; marker shapes tell the
// series apart a second way.
const PALETTE = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000'];
const SHAPES = ['circle', 'square', 'triangle', 'diamond', 'down', 'circle-open', 'square-open'];
const MAX_SERIES = 6;

// Groups for the suites whose peers do not fit one panel: a title and the
// peer ids, the reference row first. Peers not named here (added later) go
// to extra panels with the suite's reference rows.
const GROUPS = {
  roundtrip: [
    { title: 'procwire and Node fork IPC, by serialization', peers: ['procwire-advanced', 'procwire-json', 'procwire-plain-advanced', 'procwire-plain-json', 'node-advanced', 'node-json'] },
    { title: 'procwire channel transports', peers: ['procwire-advanced', 'procwire-unix', 'procwire-tcp', 'procwire-tls', 'nats', 'nats-request', 'nats-durable', 'node-advanced'] },
    { title: 'other IPC between processes', peers: ['procwire-advanced', 'net-unix', 'redis', 'zeromq', 'node-advanced'] },
    { title: 'Node lines with a native advanced codec', peers: ['procwire-advanced', 'node24-advanced', 'node26-advanced', 'node-advanced'] },
  ],
  // One panel per wire format and window, each fork row beside its named row.
  'fork-vs-named': ['advanced-100', 'advanced-1', 'json-100', 'json-1'].map((k) => {
    const [format, inFlight] = k.split('-');
    const ids = [`rings-${inFlight}`, `socket-${inFlight}`].flatMap((r) => [`fork-${format}-${r}`, `named-${format}-${r}`]);
    if (k === 'advanced-100') ids.push('fork-child-advanced-rings-100');
    return { title: `${format}, ${inFlight} in flight`, peers: ids };
  }),
};

function xmlEscape(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function trimZeros(text) {
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

// Tick labels: every label carries its unit, in the same style (time in
// µs / ms / s; rates with k / M), so one axis never mixes bare numbers
// with unit-suffixed ones.
function fmtTick(v, metric) {
  const unit = metric.unit;
  const num = (x) => trimZeros(x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
  if (unit === 'µs' || unit === 'ms' || unit === 's') {
    const us = unit === 'µs' ? v : unit === 'ms' ? v * 1e3 : v * 1e6;
    if (us >= 1e6) return `${num(us / 1e6)} s`;
    if (us >= 1e3) return `${num(us / 1e3)} ms`;
    return `${num(us)} µs`;
  }
  if (unit === '%') return `${num(v)}%`;
  if (v >= 1e6) return `${num(v / 1e6)}M${unit === '/s' ? '/s' : ''}`;
  if (v >= 1e3) return `${num(v / 1e3)}k${unit === '/s' ? '/s' : ''}`;
  return `${num(v)}${unit === '/s' ? '/s' : ''}`;
}

// Log-scale ticks inside [min, max]: denser mantissas when the range spans
// few decades, so a fitted axis still has several labels.
function logTicks(min, max) {
  const decades = Math.log10(max / min);
  const steps = decades < 0.6 ? [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9]
    : decades < 1.2 ? [1, 1.5, 2, 3, 5, 7] : decades < 3.5 ? [1, 2, 5] : [1];
  const ticks = [];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    for (const st of steps) {
      const v = st * 10 ** e;
      if (v >= min * 0.9999 && v <= max * 1.0001) ticks.push(v);
    }
  }
  return ticks;
}

function sampleRange(suite, peerId, x, metricId) {
  const d = suite.data && suite.data[peerId] && suite.data[peerId][x] && suite.data[peerId][x][metricId];
  if (!d) return null;
  const vs = (d.samples || [d.median]).filter((v) => Number.isFinite(v) && v > 0);
  if (!Number.isFinite(d.median) || d.median <= 0) return null;
  return { median: d.median, min: Math.min(d.median, ...vs), max: Math.max(d.median, ...vs), n: vs.length };
}

// Splits the suite's peers (all of them, failed and skipped included) into
// panels of at most MAX_SERIES.
function peerGroups(suite) {
  const all = suite.peers.map((p) => p.id);
  if (all.length <= MAX_SERIES) return [{ title: '', peers: all }];
  const groups = (GROUPS[suite.name] || [])
    .map((g) => ({ title: g.title, peers: g.peers.filter((id) => all.includes(id)) }))
    .filter((g) => g.peers.length > 0);
  const placed = new Set(groups.flatMap((g) => g.peers));
  const rest = all.filter((id) => !placed.has(id));
  if (rest.length > 0) {
    const anchors = (suite.ratioTo || []).filter((id) => all.includes(id)).slice(0, 2);
    const room = MAX_SERIES - anchors.length;
    const left = rest.filter((id) => !anchors.includes(id));
    for (let k = 0; k < left.length; k += room) {
      groups.push({ title: groups.length ? 'other peers' : '', peers: [...anchors, ...left.slice(k, k + room)] });
    }
  }
  return groups;
}

function marker(shape, x, y, r, color, fill) {
  const f = shape.endsWith('-open') ? '#ffffff' : fill;
  const base = shape.replace('-open', '');
  const c = (n) => n.toFixed(1);
  if (base === 'square') return `<rect x="${c(x - r)}" y="${c(y - r)}" width="${c(2 * r)}" height="${c(2 * r)}" fill="${f}" stroke="${color}" stroke-width="1.4"/>`;
  if (base === 'triangle') return `<path d="M${c(x)} ${c(y - r * 1.2)} L${c(x + r * 1.1)} ${c(y + r * 0.8)} L${c(x - r * 1.1)} ${c(y + r * 0.8)} Z" fill="${f}" stroke="${color}" stroke-width="1.4"/>`;
  if (base === 'down') return `<path d="M${c(x)} ${c(y + r * 1.2)} L${c(x + r * 1.1)} ${c(y - r * 0.8)} L${c(x - r * 1.1)} ${c(y - r * 0.8)} Z" fill="${f}" stroke="${color}" stroke-width="1.4"/>`;
  if (base === 'diamond') return `<path d="M${c(x)} ${c(y - r * 1.3)} L${c(x + r * 1.3)} ${c(y)} L${c(x)} ${c(y + r * 1.3)} L${c(x - r * 1.3)} ${c(y)} Z" fill="${f}" stroke="${color}" stroke-width="1.4"/>`;
  return `<circle cx="${c(x)}" cy="${c(y)}" r="${c(r)}" fill="${f}" stroke="${color}" stroke-width="1.4"/>`;
}

// Legend text at 11 px is about 6 px a character (Helvetica/Arial's
// average, digits and capitals included): the width a legend line may take
// in a panel decides how many characters fit on it.
const LEGEND_CHAR_PX = 6.1;
const LEGEND_LINE_PX = 15;
const LEGEND_GAP_PX = 4;

// Splits `text` into lines of at most `n` characters at spaces (a word
// longer than a line is cut), so a long label or reason wraps inside its
// own panel instead of running into the next one or being cut short.
function wrap(text, n) {
  const lines = [];
  let line = '';
  for (const word of String(text).split(/\s+/).filter(Boolean)) {
    const w = word.length > n ? `${word.slice(0, n - 1)}…` : word;
    if (line && line.length + 1 + w.length > n) {
      lines.push(line);
      line = w;
    } else {
      line = line ? `${line} ${w}` : w;
    }
  }
  if (line) lines.push(line);
  return lines.length ? lines : [''];
}

// The legend of one peer: its lines of text, and whether it failed or was
// skipped (then the reason follows the label, on lines of its own).
function legendEntry(suite, id, maxChars) {
  const peer = suite.peers.find((p) => p.id === id);
  const failed = peer.status === 'failed' || (peer.status === 'ok' && !(suite.data && suite.data[id]));
  const skipped = peer.status === 'skipped';
  if (failed || skipped) {
    return { peer, failed, skipped, lines: [...wrap(peer.label, maxChars), ...wrap(`${failed ? 'FAILED' : 'skipped'}: ${peer.reason || 'no result'}`, maxChars)] };
  }
  return { peer, failed, skipped, lines: wrap(peer.reason ? `${peer.label} (${peer.reason})` : peer.label, maxChars) };
}

function legendHeight(entries) {
  return entries.reduce((h, e) => h + e.lines.length * LEGEND_LINE_PX + LEGEND_GAP_PX, 0);
}

// A colour and a shape for each peer in each group, distinct within the
// group. Peers shown in several groups (the reference rows) keep theirs in
// all of them; the others take what those leave free.
function seriesStyles(suite, groups) {
  const count = {};
  for (const g of groups) for (const id of g.peers) count[id] = (count[id] || 0) + 1;
  const ref = (suite.ratioTo || [])[0];
  const shared = suite.peers.map((p) => p.id).filter((id) => count[id] > 1)
    .sort((a, b) => (b === ref) - (a === ref));
  const fixed = {};
  shared.forEach((id, k) => { fixed[id] = k; });
  const style = new Map();
  for (const g of groups) {
    const taken = new Set(g.peers.filter((id) => id in fixed).map((id) => fixed[id]));
    let next = 0;
    for (const id of g.peers) {
      let k = fixed[id];
      if (k === undefined) {
        while (taken.has(next)) next++;
        k = next;
        taken.add(k);
      }
      style.set(`${g.peers.join(',')}|${id}`, { color: PALETTE[k % PALETTE.length], shape: SHAPES[k % SHAPES.length] });
    }
  }
  return (g, id) => style.get(`${g.peers.join(',')}|${id}`);
}

function toSvg(suite) {
  const metrics = (suite.chartMetrics || [suite.metrics[0].id]).map((id) => suite.metrics.find((x) => x.id === id)).filter(Boolean);
  const groups = peerGroups(suite);
  const ref = (suite.ratioTo || [])[0];
  const xs = suite.xs.map(Number);
  const style = seriesStyles(suite, groups);
  const cols = groups.length > 1 ? 2 : 1;
  const W = 980;
  const panelW = cols === 1 ? W : W / 2;
  const plot = { left: 78, right: 16, top: 34, height: 230 };
  // The legend starts 40 px left of the plot and its text 28 px further;
  // it may use the panel's width up to a margin before the next panel.
  const legendChars = Math.floor((panelW - (plot.left - 40) - 28 - 12) / LEGEND_CHAR_PX);
  const legends = groups.map((g) => g.peers.map((id) => legendEntry(suite, id, legendChars)));
  const panelH = plot.top + plot.height + 44 + Math.max(...legends.map(legendHeight)) + 12;
  const rows = Math.ceil(groups.length / cols) * metrics.length;
  const headH = 46;
  const H = headH + rows * panelH + 8;

  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
    'font-family="Helvetica, Arial, sans-serif" font-size="12">');
  out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(`<text x="${W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${xmlEscape(suite.title)}</text>`);
  const repeats = suite.repeats ? `median of ${suite.repeats} repeats, whiskers min–max` : 'median';
  out.push(`<text x="${W / 2}" y="38" text-anchor="middle" font-size="11" fill="#444">` +
    `${xmlEscape(`${repeats}; log scales`)}</text>`);

  metrics.forEach((mt, mi) => {
    // The y range is fitted to this metric's data, whiskers included, with
    // a little room: no empty decade above or below.
    const vals = [];
    for (const p of suite.peers) for (const x of suite.xs) {
      const r = sampleRange(suite, p.id, x, mt.id);
      if (r) vals.push(r.min, r.max);
    }
    let yMin = vals.length ? Math.min(...vals) : 1;
    let yMax = vals.length ? Math.max(...vals) : 10;
    const span = Math.max(Math.log10(yMax / yMin), 0.3);
    yMin /= 10 ** (span * 0.06);
    yMax *= 10 ** (span * 0.06);
    const ticks = logTicks(yMin, yMax);
    const xMin = Math.min(...xs);
    const xMax = Math.max(...xs);

    groups.forEach((g, gi) => {
      const ox = (gi % cols) * panelW;
      const oy = headH + (mi * Math.ceil(groups.length / cols) + Math.floor(gi / cols)) * panelH;
      const pw = panelW - plot.left - plot.right;
      const ph = plot.height;
      const px = ox + plot.left;
      const py = oy + plot.top;
      const pad = xs.length > 1 ? 18 : 0;
      const lx = (x) => px + (xMax === xMin ? pw / 2 : pad + ((Math.log(x) - Math.log(xMin)) / (Math.log(xMax) - Math.log(xMin))) * (pw - 2 * pad));
      const ly = (y) => py + ph - ((Math.log(y) - Math.log(yMin)) / (Math.log(yMax) - Math.log(yMin))) * ph;
      const title = [g.title, metrics.length > 1 ? mt.label : ''].filter(Boolean).join(' — ');
      if (title) out.push(`<text x="${px + pw / 2}" y="${oy + 20}" text-anchor="middle" font-size="13" font-weight="bold">${xmlEscape(title)}</text>`);
      out.push('<g stroke="#e6e6e6" stroke-width="1">');
      for (const t of ticks) out.push(`<line x1="${px}" x2="${px + pw}" y1="${ly(t).toFixed(1)}" y2="${ly(t).toFixed(1)}"/>`);
      for (const x of xs) out.push(`<line x1="${lx(x).toFixed(1)}" x2="${lx(x).toFixed(1)}" y1="${py}" y2="${py + ph}"/>`);
      out.push('</g>');
      out.push(`<rect x="${px}" y="${py}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`);
      for (const t of ticks) {
        out.push(`<text x="${px - 6}" y="${(ly(t) + 4).toFixed(1)}" text-anchor="end" font-size="11">${xmlEscape(fmtTick(t, mt))}</text>`);
      }
      for (const x of xs) {
        out.push(`<text x="${lx(x).toFixed(1)}" y="${py + ph + 16}" text-anchor="middle" font-size="11">${xmlEscape(fmtX(suite, x))}</text>`);
      }
      out.push(`<text x="${px + pw / 2}" y="${py + ph + 32}" text-anchor="middle" font-size="11" fill="#444">${xmlEscape(suite.xLabel)}</text>`);
      out.push(`<text transform="translate(${ox + 14} ${py + ph / 2}) rotate(-90)" text-anchor="middle" font-size="11" fill="#444">` +
        `${xmlEscape(`${mt.label} (${mt.better} is better)`)}</text>`);

      // Series: the reference row last, so it is drawn on top.
      const order = [...g.peers].sort((a, b) => (a === ref) - (b === ref));
      for (const id of order) {
        const peer = suite.peers.find((p) => p.id === id);
        if (peer.status !== 'ok') continue;
        const { color, shape } = style(g, id);
        const bold = id === ref;
        const pts = xs.map((x, k) => [x, sampleRange(suite, id, suite.xs[k], mt.id)]);
        const have = pts.filter(([, r]) => r);
        // A gap in the line where a point is missing. Categories (the
        // codec's message shapes) are points only: a line between two
        // unrelated shapes would suggest a trend that is not there.
        let d = '';
        let pen = false;
        for (const [x, r] of pts) {
          if (!r || suite.categorical) { pen = false; continue; }
          d += `${pen ? 'L' : 'M'}${lx(x).toFixed(1)} ${ly(r.median).toFixed(1)} `;
          pen = true;
        }
        if (d) out.push(`<path d="${d.trim()}" fill="none" stroke="${color}" stroke-width="${bold ? 2.8 : 1.6}"/>`);
        for (const [x, r] of have) {
          const cx = lx(x);
          if (r.n > 1 && ly(r.min) - ly(r.max) > 1) {
            out.push(`<path d="M${cx.toFixed(1)} ${ly(r.max).toFixed(1)} V${ly(r.min).toFixed(1)} M${(cx - 4).toFixed(1)} ${ly(r.max).toFixed(1)} h8 M${(cx - 4).toFixed(1)} ${ly(r.min).toFixed(1)} h8" stroke="${color}" stroke-width="1.2" fill="none"/>`);
          }
          out.push(`<g>${marker(shape, cx, ly(r.median), bold ? 4 : 3.2, color, color)}<title>${xmlEscape(
            `${peer.label}, ${fmtX(suite, x)}: ${fmtValue(r.median, mt)}${r.n > 1 ? ` (min ${fmtValue(r.min, mt)}, max ${fmtValue(r.max, mt)})` : ''}`)}</title></g>`);
        }
        // Sizes this peer has no value for: × on the x axis.
        for (const [x, r] of pts) {
          if (r || have.length === 0) continue;
          const cx = lx(x);
          const cy = py + ph - 8;
          out.push(`<path d="M${(cx - 4).toFixed(1)} ${cy - 4} l8 8 M${(cx + 4).toFixed(1)} ${cy - 4} l-8 8" stroke="${color}" stroke-width="2"><title>${xmlEscape(`${peer.label}, ${fmtX(suite, x)}: no result`)}</title></path>`);
        }
      }

      // Legend under the panel: every peer of the group, failed and skipped
      // ones marked as such.
      let ly0 = py + ph + 50;
      const lx0 = px - 40;
      for (const entry of legends[gi]) {
        const id = entry.peer.id;
        const { color, shape } = style(g, id);
        const bold = id === ref;
        let fill = '';
        if (entry.failed || entry.skipped) {
          const mark = entry.failed ? '#c00000' : '#777777';
          fill = ` fill="${mark}"`;
          out.push(`<path d="M${lx0 + 7} ${ly0 - 5} l8 8 M${lx0 + 15} ${ly0 - 5} l-8 8" stroke="${mark}" stroke-width="2"/>`);
        } else {
          out.push(`<line x1="${lx0}" x2="${lx0 + 22}" y1="${ly0}" y2="${ly0}" stroke="${color}" stroke-width="${bold ? 2.8 : 1.6}"/>`);
          out.push(marker(shape, lx0 + 11, ly0, bold ? 4 : 3.2, color, color));
        }
        for (const line of entry.lines) {
          out.push(`<text x="${lx0 + 28}" y="${ly0 + 4}" font-size="11"${fill}${bold ? ' font-weight="bold"' : ''}>${xmlEscape(line)}</text>`);
          ly0 += LEGEND_LINE_PX;
        }
        ly0 += LEGEND_GAP_PX;
      }
    });
  });
  out.push('</svg>');
  return out.join('\n');
}

// ---- files ------------------------------------------------------------------------

function localDate(d = new Date()) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}

// Writes results.json (unless json is false: re-rendering a run in its own
// directory), results.md and <suite>.svg into dir; returns the paths.
function writeReport(results, dir, { json = true } = {}) {
  fs.mkdirSync(dir, { recursive: true });
  const files = [];
  if (json) {
    const file = path.join(dir, 'results.json');
    fs.writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
    files.push(file);
  }
  const md = path.join(dir, 'results.md');
  let text = toMarkdown(results);
  const charts = [];
  for (const suite of Object.values(results.suites)) {
    if (suite.error) continue;
    const svg = path.join(dir, `${suite.name}.svg`);
    fs.writeFileSync(svg, `${toSvg(suite)}\n`);
    files.push(svg);
    charts.push(`![${suite.title}](${suite.name}.svg)`);
  }
  if (charts.length) text += `\n## Charts\n\n${charts.join('\n\n')}\n`;
  fs.writeFileSync(md, text);
  files.push(md);
  return files;
}

module.exports = { writeReport, toMarkdown, suiteMarkdown, toSvg, histogramText, localDate, fmtValue, fmtTick, logTicks, peerGroups, seriesStyles, MAX_SERIES };
