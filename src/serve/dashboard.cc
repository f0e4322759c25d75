#include "serve/dashboard.h"

#include <openssl/evp.h>

#include <array>

namespace dualpath::serve {
namespace {

constexpr std::string_view kStyle = R"css(
:root { --bg: #0f1419; --panel: #171e26; --line: #2a3441; --text: #d8dee6; --dim: #8a96a3;
        --pe: #4c9aff; --de: #ffab40; --p50: #57d9a3; --p99: #ff6b6b; --flight: #c39bd3;
        --tok: #79e2f2; --queue: #b0bec5; --ok: #57d9a3; --bad: #ff6b6b; }
* { box-sizing: border-box; }
body { margin: 0; padding: 14px 18px; background: var(--bg); color: var(--text);
       font: 13px/1.35 "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
header { display: flex; align-items: baseline; gap: 14px; margin-bottom: 10px; }
h1 { font-size: 19px; margin: 0; font-weight: 600; }
h2 { font-size: 13px; margin: 14px 0 6px; color: var(--dim); font-weight: 600;
     text-transform: uppercase; letter-spacing: .06em; }
#cluster { color: var(--dim); }
#status { margin-left: auto; padding: 2px 10px; border-radius: 10px; background: var(--panel); }
#status[data-state="ok"]::before { content: "\25CF  "; color: var(--ok); }
#status[data-state="error"] { color: var(--bad); }
#tiles { display: grid; grid-template-columns: repeat(8, 1fr); gap: 8px; }
.tile { background: var(--panel); border: 1px solid var(--line); border-radius: 6px;
        padding: 8px 10px; }
.tile .k { color: var(--dim); font-size: 11px; }
.tile .v { font-size: 21px; font-weight: 600; margin-top: 2px; white-space: nowrap; }
.tile .s { color: var(--dim); font-size: 11px; white-space: nowrap; }
#charts { display: grid; grid-template-columns: 1fr 1fr; gap: 8px; margin-top: 8px; }
figure { margin: 0; background: var(--panel); border: 1px solid var(--line); border-radius: 6px;
         padding: 6px 10px 4px; }
figcaption { display: flex; gap: 14px; align-items: baseline; font-weight: 600; }
figcaption .legend { font-weight: 400; color: var(--dim); display: flex; gap: 12px;
                     margin-left: auto; }
.sw { display: inline-block; width: 10px; height: 3px; margin-right: 5px; vertical-align: middle; }
svg.chart { width: 100%; height: 170px; display: block; }
svg text { fill: var(--dim); font-size: 10px; }
table { width: 100%; border-collapse: collapse; background: var(--panel);
        border: 1px solid var(--line); border-radius: 6px; }
th, td { text-align: left; padding: 5px 9px; border-bottom: 1px solid var(--line);
         white-space: nowrap; }
th { color: var(--dim); font-weight: 600; font-size: 11px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td .sub { color: var(--dim); font-size: 11px; }
svg.spark { width: 170px; height: 30px; display: block; }
.up { color: var(--ok); } .down { color: var(--bad); font-weight: 600; }
.role-prefill { color: var(--pe); } .role-decode { color: var(--de); }
#totals { display: flex; flex-wrap: wrap; gap: 6px 22px; background: var(--panel);
          border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; }
#totals span.k { color: var(--dim); margin-right: 6px; }
footer { color: var(--dim); font-size: 11px; margin-top: 10px; }
)css";

constexpr std::string_view kBody = R"html(
<header>
  <h1>dualpath</h1>
  <span id="cluster">cluster</span>
  <span id="status" data-state="connecting">connecting&#8230;</span>
</header>
<section id="tiles"></section>
<section id="charts">
  <figure><figcaption>KV read from storage, by path <span class="legend" id="lg-kv"></span></figcaption>
    <svg class="chart" id="chart-kv" viewBox="0 0 660 170" preserveAspectRatio="none"></svg></figure>
  <figure><figcaption>Time to first token <span class="legend" id="lg-ttft"></span></figcaption>
    <svg class="chart" id="chart-ttft" viewBox="0 0 660 170" preserveAspectRatio="none"></svg></figure>
  <figure><figcaption>Requests in flight <span class="legend" id="lg-flight"></span></figcaption>
    <svg class="chart" id="chart-flight" viewBox="0 0 660 170" preserveAspectRatio="none"></svg></figure>
  <figure><figcaption>Output tokens <span class="legend" id="lg-tok"></span></figcaption>
    <svg class="chart" id="chart-tok" viewBox="0 0 660 170" preserveAspectRatio="none"></svg></figure>
</section>
<h2>Nodes</h2>
<table id="nodes">
  <thead><tr><th>node</th><th>role</th><th>lease</th><th class="num">storage read queue</th>
    <th></th><th class="num">DRAM buffer in use</th><th class="num">KV read, PE path</th>
    <th class="num">KV read, DE path</th><th>read bytes/s: PE, DE</th></tr></thead>
  <tbody id="node-rows"></tbody>
</table>
<h2>Since the server started</h2>
<div id="totals"></div>
<footer id="about"></footer>
)html";

// The script. No string from the server is ever parsed as HTML: text goes in with textContent
// (el() below) and SVG is built node by node.
constexpr std::string_view kScript = R"js(
'use strict';
(() => {
const POLL_MS = 1000;          // one scrape of /metrics a second
const MAX_SPAN_S = 180;        // the charts show the last three minutes at most
const RATE_WINDOW_S = 5;       // rates over the last 5 s (Prometheus: rate(x[5s]))
const QUANTILE_WINDOW_S = 15;  // TTFT p50/p99 over the observations of the last 15 s
const M = 'dualpath:';
const TTFT = M + 'time_to_first_token_seconds';

// ---- the Prometheus text format (0.0.4) -------------------------------------------------
function parseValue(s) {
  if (s === '+Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  return Number(s);  // NaN for 'NaN' and for anything malformed
}
// [{name, labels, value}] of every sample line; comments and malformed lines are skipped.
function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (line === '' || line[0] === '#') continue;
    const m = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (!m) continue;
    let i = m[0].length;
    const labels = {};
    let ok = true;
    if (line[i] === '{') {
      i++;
      while (ok && i < line.length && line[i] !== '}') {
        const lm = /^\s*([a-zA-Z_][a-zA-Z0-9_]*)="/.exec(line.slice(i));
        if (!lm) { ok = false; break; }
        i += lm[0].length;
        let v = '';
        while (i < line.length && line[i] !== '"') {
          if (line[i] === '\\' && i + 1 < line.length) {
            v += line[i + 1] === 'n' ? '\n' : line[i + 1];
            i += 2;
          } else {
            v += line[i++];
          }
        }
        if (line[i] !== '"') { ok = false; break; }
        i++;
        labels[lm[1]] = v;
        if (line[i] === ',') i++;
      }
      if (line[i] !== '}') ok = false;
      i++;
    }
    if (!ok) continue;
    const fields = line.slice(i).trim().split(/\s+/);
    if (fields[0] === '') continue;
    out.push({name: m[0], labels, value: parseValue(fields[0])});
  }
  return out;
}

// ---- one scrape and the arithmetic on scrapes --------------------------------------------
class Scrape {
  constructor(t, samples) {
    this.t = t;  // seconds, performance.now(): monotonic
    this.byName = new Map();
    for (const s of samples) {
      if (!this.byName.has(s.name)) this.byName.set(s.name, []);
      this.byName.get(s.name).push(s);
    }
  }
  series(name) { return this.byName.get(name) || []; }
  // The sum of the series of `name` whose labels include `filter`; 0 when none does (a counter
  // that has not been touched yet). Remembered: every render asks each scrape again.
  sum(name, filter = {}) {
    const key = name + JSON.stringify(filter);
    if (!this.sums) this.sums = new Map();
    if (this.sums.has(key)) return this.sums.get(key);
    let v = 0;
    for (const s of this.series(name)) {
      if (Object.entries(filter).every(([k, x]) => s.labels[k] === x)) v += s.value;
    }
    this.sums.set(key, v);
    return v;
  }
  has(name) { return this.byName.has(name); }
  // A histogram's cumulative buckets [{le, count}], by le.
  buckets(name) {
    return this.series(name + '_bucket')
        .map(s => ({le: parseValue(s.labels.le), count: s.value}))
        .sort((a, b) => a.le - b.le);
  }
}

// Prometheus's histogram_quantile (promql/quantile.go, bucketQuantile) on cumulative buckets.
function histogramQuantile(q, buckets) {
  if (buckets.length < 2 || buckets[buckets.length - 1].le !== Infinity) return NaN;
  for (let i = 1; i < buckets.length; i++) {  // ensureMonotonic
    if (buckets[i].count < buckets[i - 1].count) buckets[i].count = buckets[i - 1].count;
  }
  const observations = buckets[buckets.length - 1].count;
  if (observations === 0) return NaN;
  let rank = q * observations;
  let b = 0;
  while (b < buckets.length - 1 && buckets[b].count < rank) b++;
  if (b === buckets.length - 1) return buckets[buckets.length - 2].le;
  if (b === 0 && buckets[0].le <= 0) return buckets[0].le;
  let start = 0;
  const end = buckets[b].le;
  let count = buckets[b].count;
  if (b > 0) {
    start = buckets[b - 1].le;
    count -= buckets[b - 1].count;
    rank -= buckets[b - 1].count;
  }
  return start + (end - start) * (rank / count);
}

const history = [];  // scrapes, oldest first, trimmed to MAX_SPAN_S + the windows
// The scrape `window` seconds before `i` (the oldest when the page is younger than that).
function before(i, window) {
  let j = i;
  while (j > 0 && history[i].t - history[j - 1].t <= window + 0.25) j--;
  return j === i ? null : history[j];
}
// A counter's (or a sum of counters') rate per second at history[i], as rate(): a counter that
// went down was reset (the server restarted) and counts from 0.
function rate(i, name, filter) {
  const a = before(i, RATE_WINDOW_S), b = history[i];
  if (!a) return NaN;
  let d = b.sum(name, filter) - a.sum(name, filter);
  if (d < 0) d = b.sum(name, filter);
  return d / (b.t - a.t);
}
// TTFT quantile over the observations of the window before history[i] (NaN: none).
function windowQuantile(i, q) {
  const a = before(i, QUANTILE_WINDOW_S), b = history[i];
  if (!a) return NaN;
  const old = new Map(a.buckets(TTFT).map(x => [x.le, x.count]));
  const delta = b.buckets(TTFT).map(x => ({le: x.le, count: x.count - (old.get(x.le) || 0)}));
  if (delta.some(x => x.count < 0)) return NaN;  // a restart inside the window
  return histogramQuantile(q, delta);
}

// ---- formatting ------------------------------------------------------------------------
function bytes(v) {
  if (!isFinite(v)) return '\u2013';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return (u === 0 ? v.toFixed(0) : v.toFixed(v < 10 ? 2 : 1)) + ' ' + units[u];
}
function seconds(v) {
  if (!isFinite(v)) return '\u2013';
  if (v === 0) return '0';
  return v < 1 ? (v * 1000).toFixed(v < 0.01 ? 2 : 0) + ' ms' : v.toFixed(2) + ' s';
}
function count(v) {
  if (!isFinite(v)) return '\u2013';
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(2) + ' M';
  if (Math.abs(v) >= 1e4) return (v / 1e3).toFixed(1) + ' k';
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

// ---- DOM helpers: text only ---------------------------------------------------------------
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
const SVG = 'http://www.w3.org/2000/svg';  // a namespace name, not a resource
function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
// A figure read from /metrics: its text, and what a test needs to check it against a scrape.
function figure(tag, name, filter, value, text, cls) {
  const e = el(tag, cls ? {class: cls} : {}, text);
  e.dataset.metric = name;
  e.dataset.labels = JSON.stringify(filter);
  e.dataset.value = String(value);
  return e;
}
function swatch(color) {
  const s = el('span', {class: 'sw'});
  s.style.background = color;  // CSSOM, which the page's style policy allows
  return s;
}
const css = name => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

// ---- charts ------------------------------------------------------------------------------
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
// The charts' time span: the page's history rounded up to 30 s, at most MAX_SPAN_S (a page
// just opened shows its first seconds across the chart, not squeezed into a corner).
function span() {
  const age = history.length ? history[history.length - 1].t - history[0].t : 0;
  return Math.min(MAX_SPAN_S, Math.max(30, Math.ceil(age / 30) * 30));
}
// Lines [{color, points: [[t, v]]}] over the last span() seconds; NaN is a gap.
function drawChart(box, lines, fmt, now, width = 660, height = 170, axes = true) {
  const spanS = span();
  const left = axes ? 64 : 1, right = width - 2, top = 6, bottom = height - (axes ? 16 : 2);
  let max = 0;
  for (const l of lines) for (const [, v] of l.points) if (isFinite(v)) max = Math.max(max, v);
  max = niceMax(max);
  const x = t => left + (right - left) * (1 - (now - t) / spanS);
  const y = v => bottom - (bottom - top) * (v / max);
  box.replaceChildren();
  if (axes) {
    for (let k = 0; k <= 4; k++) {
      const v = max * k / 4;
      box.append(svg('line', {x1: left, x2: right, y1: y(v), y2: y(v), stroke: '#2a3441'}));
      box.append(svg('text', {x: left - 6, y: y(v) + 3, 'text-anchor': 'end'}, fmt(v)));
    }
    for (const s of [spanS, spanS * 2 / 3, spanS / 3, 0]) {
      const anchor = s === 0 ? 'end' : s === spanS ? 'start' : 'middle';
      const label = s === 0 ? 'now' : '\u2212' + (s % 60 === 0 ? s / 60 + ' min' : s + ' s');
      box.append(svg('text', {x: x(now - s), y: height - 3, 'text-anchor': anchor}, label));
    }
  }
  for (const l of lines) {
    let d = '', pen = false;
    for (const [t, v] of l.points) {
      if (now - t > spanS || !isFinite(v)) { pen = false; continue; }
      d += (pen ? 'L' : 'M') + x(t).toFixed(1) + ' ' + y(v).toFixed(1);
      pen = true;
    }
    const attrs = {d, fill: 'none', stroke: l.color, 'stroke-width': axes ? 2 : 1.5,
                   'vector-effect': 'non-scaling-stroke', 'stroke-linejoin': 'round'};
    const p = svg('path', attrs);
    p.dataset.series = l.name;
    p.dataset.points = String(l.points.filter(([, v]) => isFinite(v)).length);
    p.dataset.nonzero = String(l.points.filter(([, v]) => v > 0).length);
    box.append(p);
  }
}
function legend(id, items) {
  document.getElementById(id).replaceChildren(
      ...items.map(([color, label, value]) => el('span', {}, swatch(color), label + ' ' + value)));
}

// ---- the page ----------------------------------------------------------------------------
let polls = 0;
function tile(key, value, sub, id) {
  const v = value instanceof Node ? value : el('div', {}, value);
  v.classList.add('v');
  if (id) v.id = id;
  return el('div', {class: 'tile'}, el('div', {class: 'k'}, key), v, el('div', {class: 's'}, sub));
}
// Node label "prefill0": role order, then index.
function nodeOrder(a, b) {
  const ra = a.role === 'prefill' ? 0 : 1, rb = b.role === 'prefill' ? 0 : 1;
  if (ra !== rb) return ra - rb;
  const na = parseInt(a.node.replace(/^\D*/, ''), 10), nb = parseInt(b.node.replace(/^\D*/, ''), 10);
  return na !== nb && isFinite(na) && isFinite(nb) ? na - nb : a.node.localeCompare(b.node);
}

function render() {
  const i = history.length - 1, s = history[i], now = s.t;
  const nodes = s.series(M + 'node_up')
      .map(x => ({node: x.labels.node || '?', role: x.labels.role || '?', up: x.value}))
      .sort(nodeOrder);
  const ttl = s.sum(M + 'lease_ttl_seconds');
  const nPrefill = nodes.filter(n => n.role === 'prefill').length;
  document.getElementById('cluster').textContent =
      nPrefill + ' prefill + ' + (nodes.length - nPrefill) + ' decode nodes';

  // Tiles: the figures of now.
  const up = nodes.filter(n => n.up === 1).length;
  const pe = rate(i, M + 'kv_read_bytes_total', {path: 'pe'});
  const de = rate(i, M + 'kv_read_bytes_total', {path: 'de'});
  const p50 = windowQuantile(i, 0.5), p99 = windowQuantile(i, 0.99);
  const running = s.sum(M + 'num_requests_running');
  const prompt = s.sum(M + 'prompt_tokens_total'), cached = s.sum(M + 'prompt_tokens_cached_total');
  const tiles = [
    tile('requests in flight', figure('div', M + 'num_requests_running', {}, running,
                                      count(running)), 'admitted, not yet answered'),
    tile('nodes holding a lease', up + ' / ' + nodes.length,
         ttl > 0 ? 'lease ' + seconds(ttl) : '', 'nodes-up'),
    tile('output tokens/s', count(rate(i, M + 'generation_tokens_total', {})),
         'last ' + RATE_WINDOW_S + ' s', 'tokens-per-s'),
    tile('TTFT p50', seconds(p50), 'last ' + QUANTILE_WINDOW_S + ' s', 'ttft-p50'),
    tile('TTFT p99', seconds(p99), 'last ' + QUANTILE_WINDOW_S + ' s', 'ttft-p99'),
    tile('KV read, PE path', bytes(pe) + '/s', 'prefill nodes\u2019 storage NICs', 'kv-pe-rate'),
    tile('KV read, DE path', bytes(de) + '/s', 'decode nodes\u2019 storage NICs', 'kv-de-rate'),
    tile('prompt tokens cached', prompt > 0 ? (100 * cached / prompt).toFixed(1) + ' %' : '\u2013',
         'hits loaded from storage', 'cached-share'),
  ];
  document.getElementById('tiles').replaceChildren(...tiles);

  // Charts: the history.
  const pts = f => history.map((h, k) => [h.t, f(k, h)]);
  const pePts = pts(k => rate(k, M + 'kv_read_bytes_total', {path: 'pe'}));
  const dePts = pts(k => rate(k, M + 'kv_read_bytes_total', {path: 'de'}));
  drawChart(document.getElementById('chart-kv'),
            [{name: 'pe', color: css('--pe'), points: pePts},
             {name: 'de', color: css('--de'), points: dePts}], v => bytes(v) + '/s', now);
  legend('lg-kv', [[css('--pe'), 'PE', bytes(pe) + '/s'], [css('--de'), 'DE', bytes(de) + '/s']]);
  drawChart(document.getElementById('chart-ttft'),
            [{name: 'p50', color: css('--p50'), points: pts(k => windowQuantile(k, 0.5))},
             {name: 'p99', color: css('--p99'), points: pts(k => windowQuantile(k, 0.99))}],
            seconds, now);
  legend('lg-ttft', [[css('--p50'), 'p50', seconds(p50)], [css('--p99'), 'p99', seconds(p99)],
                     ['transparent', '', '(' + QUANTILE_WINDOW_S + ' s window)']]);
  drawChart(document.getElementById('chart-flight'),
            [{name: 'running', color: css('--flight'),
              points: pts((k, h) => h.sum(M + 'num_requests_running'))}], count, now);
  legend('lg-flight', [[css('--flight'), 'now', count(running)]]);
  const tokPts = pts(k => rate(k, M + 'generation_tokens_total', {}));
  drawChart(document.getElementById('chart-tok'),
            [{name: 'output', color: css('--tok'), points: tokPts}], v => count(v) + '/s', now);
  legend('lg-tok', [[css('--tok'), 'per second', count(tokPts[i][1])]]);

  // Nodes.
  const rows = nodes.map(n => {
    const f = {node: n.node};
    const queue = s.sum(M + 'storage_read_queue_bytes', f);
    const dram = s.sum(M + 'dram_buffer_used_bytes', f);
    const age = s.sum(M + 'node_last_report_age_seconds', f);
    const peTotal = s.sum(M + 'kv_read_bytes_total', {node: n.node, path: 'pe'});
    const deTotal = s.sum(M + 'kv_read_bytes_total', {node: n.node, path: 'de'});
    const peRate = rate(i, M + 'kv_read_bytes_total', {node: n.node, path: 'pe'});
    const deRate = rate(i, M + 'kv_read_bytes_total', {node: n.node, path: 'de'});
    const lease = el('td', {});
    lease.append(figure('span', M + 'node_up', f, n.up, n.up === 1 ? 'held' : 'lost',
                        n.up === 1 ? 'up' : 'down'),
                 el('span', {class: 'sub'}, ' \u00b7 last report ' + seconds(age) + ' ago'));
    const qSpark = svg('svg', {class: 'spark', viewBox: '0 0 170 30', preserveAspectRatio: 'none'});
    drawChart(qSpark, [{name: 'queue', color: css('--queue'),
                        points: pts((k, h) => h.sum(M + 'storage_read_queue_bytes', f))}],
              bytes, now, 170, 30, false);
    const rSpark = svg('svg', {class: 'spark', viewBox: '0 0 170 30', preserveAspectRatio: 'none'});
    drawChart(rSpark, [
      {name: 'pe', color: css('--pe'),
       points: pts(k => rate(k, M + 'kv_read_bytes_total', {node: n.node, path: 'pe'}))},
      {name: 'de', color: css('--de'),
       points: pts(k => rate(k, M + 'kv_read_bytes_total', {node: n.node, path: 'de'}))}],
              bytes, now, 170, 30, false);
    const path = (total, r, p) => el('td', {class: 'num'},
        figure('span', M + 'kv_read_bytes_total', {node: n.node, path: p}, total, bytes(total)),
        el('span', {class: 'sub'}, '  ' + bytes(r) + '/s'));
    const tr = el('tr', {},
        el('td', {}, n.node), el('td', {class: 'role-' + (n.role === 'prefill' ? 'prefill' : 'decode')}, n.role),
        lease,
        el('td', {class: 'num'}, figure('span', M + 'storage_read_queue_bytes', f, queue, bytes(queue))),
        el('td', {}, qSpark),
        el('td', {class: 'num'}, figure('span', M + 'dram_buffer_used_bytes', f, dram, bytes(dram))),
        path(peTotal, peRate, 'pe'), path(deTotal, deRate, 'de'),
        el('td', {}, rSpark));
    tr.dataset.node = n.node;
    tr.dataset.role = n.role;
    return tr;
  });
  if (rows.length === 0) {
    rows.push(el('tr', {}, el('td', {colspan: '9'}, 'no node has registered yet')));
  }
  document.getElementById('node-rows').replaceChildren(...rows);

  // Totals: counters since the server started.
  const t = (k, node) => el('span', {}, el('span', {class: 'k'}, k), node);
  const c = (name, filter, f = count) => figure('span', name, filter, s.sum(name, filter),
                                                f(s.sum(name, filter)));
  const totals = [
    t('TTFT p50', quantileFigure(s, 0.5)), t('p99', quantileFigure(s, 0.99)),
    t('turns', c(TTFT + '_count', {})),
    t('prompt tokens', c(M + 'prompt_tokens_total', {})),
    t('cached', c(M + 'prompt_tokens_cached_total', {})),
    t('output tokens', c(M + 'generation_tokens_total', {})),
    t('KV read PE', c(M + 'kv_read_bytes_total', {path: 'pe'}, bytes)),
    t('DE', c(M + 'kv_read_bytes_total', {path: 'de'}, bytes)),
    t('DE DRAM tier', c(M + 'kv_read_bytes_total', {path: 'de_dram'}, bytes)),
    t('migrations', c(M + 'request_migrations_total', {})),
  ];
  for (const r of s.series(M + 'requests_total').map(x => x.labels.status).sort()) {
    totals.push(t('requests ' + r, c(M + 'requests_total', {status: r})));
  }
  document.getElementById('totals').replaceChildren(...totals);
}
function quantileFigure(s, q) {
  const v = histogramQuantile(q, s.buckets(TTFT));
  const e = el('span', {}, seconds(v));
  e.dataset.histogram = TTFT;
  e.dataset.quantile = String(q);
  e.dataset.value = String(v);
  return e;
}

function setStatus(state, text) {
  const e = document.getElementById('status');
  e.dataset.state = state;
  e.textContent = text;
}

async function poll() {
  try {
    const r = await fetch('/metrics', {cache: 'no-store', credentials: 'same-origin'});
    if (r.status === 401 || r.status === 403) {
      setStatus('error', 'GET /metrics: HTTP ' + r.status +
                (r.status === 401 ? ' (the key was refused: reload the page to give another)'
                                  : ' (the key lacks the metrics scope)'));
      return;
    }
    if (!r.ok) {
      setStatus('error', 'GET /metrics: HTTP ' + r.status);
      return;
    }
    const text = await r.text();
    history.push(new Scrape(performance.now() / 1000, parseMetrics(text)));
    const newest = history[history.length - 1].t;
    while (history.length > 1 && newest - history[0].t > MAX_SPAN_S + QUANTILE_WINDOW_S + 2) {
      history.shift();
    }
    polls++;
    render();
    const polled = document.getElementById('about');
    polled.dataset.polls = String(polls);
    polled.textContent = 'GET /metrics every ' + POLL_MS / 1000 + ' s; ' + polls +
        ' scrapes since this page opened (the charts begin then). Rates are over ' +
        RATE_WINDOW_S + ' s, TTFT quantiles over ' + QUANTILE_WINDOW_S +
        ' s of bucket counts, as histogram_quantile; bytes in binary units (MiB = 2^20 B).';
    setStatus('ok', 'live \u00b7 ' + new Date().toLocaleTimeString());
  } catch (e) {
    setStatus('error', 'GET /metrics failed: ' + e.message + ' (retrying)');
  } finally {
    setTimeout(poll, POLL_MS);
  }
}
poll();
})();
)js";

std::string base64(const std::array<unsigned char, 32>& digest) {
  std::string out(4 * ((digest.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), digest.data(),
                                static_cast<int>(digest.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// CSP's hash source: 'sha256-' and the base64 of the SHA-256 of the element's text.
std::string hash_source(std::string_view text) {
  std::array<unsigned char, 32> digest{};
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &len, EVP_sha256(), nullptr);
  return "'sha256-" + base64(digest) + "'";
}

}  // namespace

std::string_view dashboard_page() {
  static const std::string page = std::string(R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dualpath cluster</title>
<link rel="icon" href="data:,">
<style>)") + std::string(kStyle) + "</style></head><body>" +
                                  std::string(kBody) + "<script>" + std::string(kScript) +
                                  "</script></body></html>\n";
  return page;
}

const std::string& dashboard_csp() {
  static const std::string csp = "default-src 'none'; script-src " + hash_source(kScript) +
                                 "; style-src " + hash_source(kStyle) +
                                 "; connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                                 "form-action 'none'; frame-ancestors 'none'";
  return csp;
}

}  // namespace dualpath::serve
