'use strict';
// Turns a bench run into files: results.json (everything, with every sample),
// results.md (Markdown tables: values, ratios to procwire and to Node's
// built-in modes, message-size histograms) and one hand-written SVG chart per
// suite (log-scale axes: sizes span decades).

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
    lines.push(`**Ratios** (${primary.label}, ${primary.better} is better; ×2 = twice as good)`, '');
    lines.push(head.replace(`${suite.xLabel} →`, 'ratio'), rule);
    for (const [a, b] of suite.pairs) {
      if (!peers.find((p) => p.id === a) || !peers.find((p) => p.id === b)) continue;
      lines.push(`| ${mdEscape(peerLabel(suite, a))} ÷ ${mdEscape(peerLabel(suite, b))} | ` +
        `${suite.xs.map((x) => fmtRatio(advantage(value(suite, a, x, primary.id), value(suite, b, x, primary.id), primary))).join(' | ')} |`);
    }
    lines.push('');
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

const PALETTE = ['#d62728', '#ff7f0e', '#e377c2', '#bcbd22', '#8c564b', '#9467bd', '#1f77b4', '#17becf',
  '#2ca02c', '#7f7f7f', '#393b79', '#637939', '#843c39', '#000000'];

function xmlEscape(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function logTicks(min, max) {
  const ticks = [];
  const lo = Math.floor(Math.log10(min));
  const hi = Math.ceil(Math.log10(max));
  const steps = hi - lo <= 3 ? [1, 2, 5] : [1];
  for (let e = lo; e <= hi; e++) {
    for (const s of steps) {
      const v = s * 10 ** e;
      if (v >= min / 1.0001 && v <= max * 1.0001) ticks.push(v);
    }
  }
  return ticks;
}

function toSvg(suite) {
  const W = 980;
  const H = 480;
  const legendW = 350;
  const m = { top: 48, right: legendW + 20, bottom: 56, left: 74 };
  const pw = W - m.left - m.right;
  const ph = H - m.top - m.bottom;
  const metrics = (suite.chartMetrics || [suite.metrics[0].id]).map((id) => suite.metrics.find((x) => x.id === id));
  const peers = okPeers(suite);
  const vals = [];
  for (const p of peers) for (const x of suite.xs) for (const mt of metrics) {
    const v = value(suite, p.id, x, mt.id);
    if (Number.isFinite(v) && v > 0) vals.push(v);
  }
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
    'font-family="Helvetica, Arial, sans-serif" font-size="12">');
  out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(`<text x="${W / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">${xmlEscape(suite.title)}</text>`);
  if (vals.length === 0) {
    out.push(`<text x="${W / 2}" y="${H / 2}" text-anchor="middle">no data</text></svg>`);
    return out.join('\n');
  }
  let yMin = Math.min(...vals);
  let yMax = Math.max(...vals);
  yMin = 10 ** Math.floor(Math.log10(yMin));
  yMax = 10 ** Math.ceil(Math.log10(yMax));
  if (yMax / yMin < 100) { yMin /= 3.1623; yMax *= 3.1623; }
  const xs = suite.xs.map(Number);
  const xMin = Math.min(...xs);
  const xMax = Math.max(...xs);
  const lx = (x) => m.left + (xMax === xMin ? pw / 2 : ((Math.log(x) - Math.log(xMin)) / (Math.log(xMax) - Math.log(xMin))) * pw);
  const ly = (y) => m.top + ph - ((Math.log(y) - Math.log(yMin)) / (Math.log(yMax) - Math.log(yMin))) * ph;
  // grid and axes
  out.push(`<g stroke="#e5e5e5" stroke-width="1">`);
  for (const t of logTicks(yMin, yMax)) out.push(`<line x1="${m.left}" x2="${m.left + pw}" y1="${ly(t).toFixed(1)}" y2="${ly(t).toFixed(1)}"/>`);
  for (const x of xs) out.push(`<line x1="${lx(x).toFixed(1)}" x2="${lx(x).toFixed(1)}" y1="${m.top}" y2="${m.top + ph}"/>`);
  out.push('</g>');
  out.push(`<rect x="${m.left}" y="${m.top}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`);
  for (const t of logTicks(yMin, yMax)) {
    out.push(`<text x="${m.left - 6}" y="${(ly(t) + 4).toFixed(1)}" text-anchor="end">${xmlEscape(fmtValue(t, metrics[0]))}</text>`);
  }
  for (const x of xs) {
    out.push(`<text x="${lx(x).toFixed(1)}" y="${m.top + ph + 18}" text-anchor="middle">${xmlEscape(fmtX(suite, x))}</text>`);
  }
  out.push(`<text x="${m.left + pw / 2}" y="${H - 16}" text-anchor="middle">${xmlEscape(suite.xLabel)} (log scale)</text>`);
  const yLabel = metrics.map((x) => x.label).join(', ');
  out.push(`<text transform="translate(18 ${m.top + ph / 2}) rotate(-90)" text-anchor="middle">` +
    `${xmlEscape(yLabel)} (log scale, ${metrics[0].better} is better)</text>`);
  // series
  let legendY = m.top + 6;
  const legendX = W - legendW;
  peers.forEach((p, i) => {
    const color = PALETTE[i % PALETTE.length];
    const bold = p.id === (suite.ratioTo || [])[0];
    metrics.forEach((mt, k) => {
      const pts = xs.map((x) => [x, value(suite, p.id, x, mt.id)]).filter(([, v]) => Number.isFinite(v) && v > 0);
      if (pts.length === 0) return;
      const dash = k === 0 ? '' : ' stroke-dasharray="6 4"';
      const d = pts.map(([x, v], j) => `${j ? 'L' : 'M'}${lx(x).toFixed(1)} ${ly(v).toFixed(1)}`).join(' ');
      out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="${bold ? 3 : 1.6}"${dash}/>`);
      for (const [x, v] of pts) {
        out.push(`<circle cx="${lx(x).toFixed(1)}" cy="${ly(v).toFixed(1)}" r="${bold ? 3.5 : 2.6}" fill="${k === 0 ? color : '#fff'}" stroke="${color}">` +
          `<title>${xmlEscape(`${p.label}, ${fmtX(suite, x)}: ${fmtValue(v, mt)} ${mt.label}`)}</title></circle>`);
      }
    });
    out.push(`<line x1="${legendX}" x2="${legendX + 22}" y1="${legendY}" y2="${legendY}" stroke="${color}" stroke-width="${bold ? 3 : 2}"/>`);
    const text = p.label.length > 50 ? `${p.label.slice(0, 49)}…` : p.label;
    out.push(`<text x="${legendX + 28}" y="${legendY + 4}" font-size="11"${bold ? ' font-weight="bold"' : ''}>${xmlEscape(text)}</text>`);
    legendY += 18;
  });
  if (metrics.length > 1) {
    legendY += 6;
    metrics.forEach((mt, k) => {
      out.push(`<line x1="${legendX}" x2="${legendX + 22}" y1="${legendY}" y2="${legendY}" stroke="#333" stroke-width="2"${k ? ' stroke-dasharray="6 4"' : ''}/>`);
      out.push(`<text x="${legendX + 28}" y="${legendY + 4}">${xmlEscape(mt.label)}</text>`);
      legendY += 18;
    });
  }
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

module.exports = { writeReport, toMarkdown, suiteMarkdown, toSvg, histogramText, localDate, fmtValue };
