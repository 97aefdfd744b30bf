// The flame-graph views of /debug/pprof/: a profile read in its JSON form
// (format=json, README "JSON profile") drawn as a flame graph or icicle on
// one canvas, filtered by labels as `go tool pprof -tagfocus` would, two
// label selections against each other (diff), and pprof's -top table.
//
// Shaped for large profiles: the samples are merged into a tree of frames
// once per selection, and the canvas draws only the frames at least
// MIN_PX wide, so 100,000 distinct stacks cost one pass over the samples
// and a few thousand rectangles.  Frame names and label values come from
// the program: they are drawn with fillText or set with textContent, never
// parsed as HTML.  One function scope, so that nothing here collides with
// index.js's names.
(() => {
'use strict';

const ROW_PX = 18;      // one frame's height
const MIN_PX = 0.5;     // narrower frames (and their callees) are not drawn
const TOP_ROWS = 200;   // rows of the top table shown

const $ = id => document.getElementById(id);
const flame = {prof: null, view: null, rects: []};
window.cpprofFlame = flame; // for browser tests and benchmarks

// ---- Reading a profile ----------------------------------------------------

const NO_LABELS = {};

// A JSON frame as the views name it, as pprof does: "function
// (file:line)", "function (file)", "function", or "0xADDR (object)".
function frameText(f) {
  if (f.address !== undefined) return f.object ? `${f.address} (${f.object})` : f.address;
  if (!f.file) return f.function;
  return f.line ? `${f.function} (${f.file}:${f.line})` : `${f.function} (${f.file})`;
}

// The profile as the views use it: the JSON's samples as they are (stacks
// leaf first, in root-first order: README "JSON profile"), frames named,
// label pairs listed for the filters' suggestions.
function prepare(json, name) {
  const pairs = new Set();
  for (const s of json.samples)
    if (s.labels)
      for (const k in s.labels) pairs.add(k + '=' + s.labels[k]);
  return {name, frames: json.frames.map(frameText), samples: json.samples, types: json.sample_types,
          defaultType: json.default_sample_type, labelled: json.labelled,
          pairs: [...pairs].sort(), proto: json.proto};
}

// A filter "key=value, key=value ...": samples whose labels hold, for every
// key named, one of the values named for it (-tagfocus).  Throws on a term
// without '='.
function parseFilter(text) {
  const want = new Map();
  for (const term of text.split(/[,\s]+/).filter(Boolean)) {
    const eq = term.indexOf('=');
    if (eq <= 0) throw new Error(`"${term}" is not key=value`);
    const key = term.slice(0, eq);
    if (!want.has(key)) want.set(key, new Set());
    want.get(key).add(term.slice(eq + 1));
  }
  return want;
}

function matches(sample, want) {
  const labels = sample.labels || NO_LABELS;
  for (const [key, values] of want)
    if (!values.has(labels[key])) return false;
  return true;
}

// ---- The tree -------------------------------------------------------------
//
// Nodes are indexes into typed arrays (frame, parent, first child, next
// sibling, one value array per side), node 0 the root, a parent always
// before its children: a few hundred thousand nodes cost a few megabytes
// and no garbage.

function newTree(sides) {
  const cap = 4096;
  const t = {n: 1, cap, frame: new Int32Array(cap), parent: new Int32Array(cap),
             first: new Int32Array(cap).fill(-1), next: new Int32Array(cap),
             v: Array.from({length: sides}, () => new Float64Array(cap)),
             w: null, sorted: new Map()};
  t.frame[0] = t.parent[0] = -1;
  return t;
}

function grow(t) {
  const wider = (a, fill) => {
    const b = new a.constructor(t.cap * 2);
    if (fill !== undefined) b.fill(fill, t.cap);
    b.set(a);
    return b;
  };
  t.frame = wider(t.frame);
  t.parent = wider(t.parent);
  t.first = wider(t.first, -1);
  t.next = wider(t.next);
  t.v = t.v.map(a => wider(a));
  t.cap *= 2;
}

function addNode(t, parent, frame) {
  if (t.n === t.cap) grow(t);
  const k = t.n++;
  t.frame[k] = frame;
  t.parent[k] = parent;
  t.next[k] = t.first[parent];
  t.first[parent] = k;
  return k;
}

// Merges the samples of each side (sides[i] a filter) into one tree; v[i]
// is side i's value at each node.  Each sample's path is matched against
// the previous one's from the root; the server sends samples in
// root-first order, so below the point where two paths part every node is
// new and needs no lookup.  Samples out of that order (checked as they
// come) are merged again with a lookup table instead.
function buildTree(prof, type, sides) {
  return merge(prof, type, sides, true) || merge(prof, type, sides, false);
}

function merge(prof, type, sides, ordered) {
  const t = newTree(sides.length);
  const lookup = ordered ? null : new Map();
  const stride = prof.frames.length + 1;
  const totals = sides.map(() => 0), hit = sides.map(() => false);
  const pathNode = [], pathFrame = [];
  let pathLen = 0;
  for (const s of prof.samples) {
    const value = s.values[type];
    if (!value) continue;
    let any = false;
    for (let i = 0; i < sides.length; i++) any = (hit[i] = matches(s, sides[i])) || any;
    if (!any) continue;
    const stack = s.stack, len = stack.length;
    let node = 0, d = 0;
    while (d < len && d < pathLen && pathFrame[d] === stack[len - 1 - d]) node = pathNode[d++];
    if (ordered && d < pathLen && (d === len || stack[len - 1 - d] < pathFrame[d]))
      return null;
    for (; d < len; d++) {
      const frame = stack[len - 1 - d];
      let kid = lookup ? lookup.get(node * stride + frame) : undefined;
      if (kid === undefined) {
        kid = addNode(t, node, frame);
        if (lookup) lookup.set(node * stride + frame, kid);
      }
      pathNode[d] = kid;
      pathFrame[d] = frame;
      node = kid;
    }
    pathLen = len;
    for (let i = 0; i < sides.length; i++) {
      if (!hit[i]) continue;
      const v = t.v[i];
      totals[i] += value;
      v[0] += value;
      for (let k = 0; k < len; k++) v[pathNode[k]] += value;
    }
  }
  return {tree: t, totals};
}

// Widths: the value itself, or for a diff the mean of the two sides'
// shares, so that each side counts as much whatever its total.
function weigh(t, totals) {
  if (totals.length === 1) {
    t.w = t.v[0].subarray(0, t.n);
    return;
  }
  const [a, b] = t.v, ta = totals[0] || 1, tb = totals[1] || 1;
  t.w = new Float64Array(t.n);
  for (let k = 0; k < t.n; k++) t.w[k] = (a[k] / ta + b[k] / tb) / 2;
}

// A node's callees, widest first (sorted once, when first drawn).
function kidsOf(t, node) {
  let kids = t.sorted.get(node);
  if (!kids) {
    kids = [];
    for (let k = t.first[node]; k >= 0; k = t.next[k]) kids.push(k);
    kids.sort((x, y) => t.w[y] - t.w[x]);
    t.sorted.set(node, kids);
  }
  return kids;
}

// ---- Drawing --------------------------------------------------------------

function hue(name) {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
  return h >>> 0;
}

function colour(view, node, name) {
  const t = view.tree;
  if (view.found && node > 0 && view.found[t.frame[node]]) return '#c026d3';
  if (view.totals.length === 2) {
    const a = t.v[0][node] / (view.totals[0] || 1), b = t.v[1][node] / (view.totals[1] || 1);
    const d = Math.max(-1, Math.min(1, (a - b) / Math.max(a, b, 1e-12)));
    const light = 92 - 42 * Math.abs(d);
    return d >= 0 ? `hsl(0, 80%, ${light}%)` : `hsl(215, 80%, ${light}%)`;
  }
  const h = hue(name);
  return `hsl(${10 + h % 40}, ${70 + h % 20}%, ${55 + (h >> 8) % 15}%)`;
}

// The rectangles to draw: the zoomed node's ancestors full width, then its
// subtree scaled to the width, frames under MIN_PX left out.
function layout(view, width) {
  const t = view.tree, rects = [], path = [];
  for (let n = view.zoom; n >= 0; n = t.parent[n]) path.unshift(n);
  path.forEach((node, depth) => rects.push({node, depth, x: 0, w: width}));
  const scale = width / (t.w[view.zoom] || 1);
  const walk = (node, depth, x) => {
    for (const kid of kidsOf(t, node)) {
      const w = t.w[kid] * scale;
      if (w < MIN_PX) break;
      rects.push({node: kid, depth, x, w});
      walk(kid, depth + 1, x);
      x += w;
    }
  };
  walk(view.zoom, path.length, 0);
  return rects;
}

function frameName(node) {
  return node === 0 ? 'all' : flame.prof.frames[flame.view.tree.frame[node]];
}

function draw() {
  const view = flame.view, canvas = $('flame-canvas');
  const width = canvas.parentElement.clientWidth;
  const rects = layout(view, width);
  const depth = rects.reduce((m, r) => Math.max(m, r.depth), 0) + 1;
  const ratio = window.devicePixelRatio || 1;
  canvas.style.width = width + 'px';
  canvas.style.height = depth * ROW_PX + 'px';
  canvas.width = Math.round(width * ratio);
  canvas.height = depth * ROW_PX * ratio;
  const g = canvas.getContext('2d');
  g.scale(ratio, ratio);
  g.font = '12px system-ui, sans-serif';
  g.textBaseline = 'middle';
  for (const r of rects) {
    r.y = view.icicle ? r.depth * ROW_PX : (depth - 1 - r.depth) * ROW_PX;
    const name = frameName(r.node);
    g.fillStyle = colour(view, r.node, name);
    g.fillRect(r.x, r.y, Math.max(r.w - 0.5, 0.5), ROW_PX - 1);
    if (r.w > 24) {
      g.save();
      g.beginPath();
      g.rect(r.x, r.y, r.w - 2, ROW_PX);
      g.clip();
      g.fillStyle = '#111';
      g.fillText(name, r.x + 3, r.y + ROW_PX / 2);
      g.restore();
    }
  }
  flame.rects = rects;
  canvas.dataset.rootValue = String(view.tree.v[0][0]);
  canvas.dataset.drawn = String(rects.length);
}

// ---- Numbers --------------------------------------------------------------

function formatValue(v, unit) {
  const scaled = (div, units) => {
    let i = 0;
    while (Math.abs(v) >= div && i < units.length - 1) { v /= div; i++; }
    return (Number.isInteger(v) ? v : v.toFixed(2)) + ' ' + units[i];
  };
  if (unit === 'nanoseconds') {
    if (Math.abs(v) >= 1e9) return (v / 1e9).toFixed(2) + ' s';
    if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(2) + ' ms';
    return v + ' ns';
  }
  if (unit === 'bytes') return scaled(1024, ['B', 'KiB', 'MiB', 'GiB', 'TiB']);
  return String(v) + (unit && unit !== 'count' ? ' ' + unit : '');
}

function percent(part, whole) {
  return (whole ? 100 * part / whole : 0).toFixed(2) + '%';
}

// ---- Views ----------------------------------------------------------------

function message(text) {
  $('flame-message').textContent = text;
  $('flame-message').hidden = !text;
}

function setGraphShown(shown) {
  $('flame-graph').hidden = !shown;
}

// The selection the controls describe, or a message saying why there is
// nothing to draw.
function selection() {
  const prof = flame.prof, mode = $('flame-mode').value;
  const texts = mode === 'diff' ? [$('flame-a').value, $('flame-b').value]
                                : [$('flame-filter').value];
  const wantsLabels = texts.some(t => t.trim());
  if (wantsLabels && !prof.labelled)
    return {error: `The ${prof.name} profile carries no labels (as in Go), ` +
                   'so it cannot be filtered by label: clear the filter to ' +
                   'see the whole profile.'};
  if (mode === 'diff' && texts.some(t => !t.trim()))
    return {error: 'Name two selections to compare, e.g. tenant=acme and tenant=initech.'};
  let sides;
  try {
    sides = texts.map(parseFilter);
  } catch (err) {
    return {error: 'Filter: ' + err.message};
  }
  return {mode, texts, sides, type: Number($('flame-type').value)};
}

function render() {
  const prof = flame.prof;
  if (!prof) return;
  const sel = selection();
  const top = $('flame-top');
  if (sel.error) {
    message(sel.error);
    setGraphShown(false);
    top.hidden = true;
    return;
  }
  const {tree, totals} = buildTree(prof, sel.type, sel.sides);
  const empty = totals.findIndex(t => t === 0);
  if (empty >= 0) {
    message(sel.texts[empty].trim()
      ? `No sample matches ${sel.texts[empty].trim()} in this profile.`
      : 'This profile has no samples of this type.');
    setGraphShown(false);
    top.hidden = true;
    return;
  }
  weigh(tree, totals);
  const unit = prof.types[sel.type].unit;
  flame.view = {tree, totals, zoom: 0, unit, icicle: $('flame-icicle').checked,
                search: '', found: null};
  setSearch($('flame-search').value);
  message(sel.mode === 'diff'
    ? `${sel.texts[0]}: ${formatValue(totals[0], unit)} against ` +
      `${sel.texts[1]}: ${formatValue(totals[1], unit)}, each as a share of ` +
      `its own total. Red: a larger share in ${sel.texts[0]}; blue: in ${sel.texts[1]}.`
    : `${formatValue(totals[0], unit)} in all.`);
  setGraphShown(sel.mode !== 'top');
  top.hidden = sel.mode !== 'top';
  if (sel.mode === 'top') renderTop(prof, sel, totals[0], unit);
  else draw();
  $('flame-detail').textContent = '';
}

// The search box: frames whose name holds the text (any case) are drawn
// highlighted; their share counts each sample once (a match below a match
// is not added again).
function setSearch(text) {
  const view = flame.view, t = view.tree, out = $('flame-found');
  view.search = text.trim().toLowerCase();
  view.found = null;
  delete out.dataset.share;
  if (!view.search) { out.textContent = ''; return; }
  const names = flame.prof.frames;
  const found = new Uint8Array(names.length);
  for (let f = 0; f < names.length; f++) found[f] = names[f].toLowerCase().includes(view.search);
  const covered = new Uint8Array(t.n);
  let share = 0, frames = 0;
  for (let k = 1; k < t.n; k++) {
    if (covered[t.parent[k]]) covered[k] = 1;
    else if (found[t.frame[k]]) { covered[k] = 1; share += t.w[k]; frames++; }
  }
  view.found = found;
  share /= t.w[0] || 1;
  out.textContent = frames ? `${percent(share, 1)} of the graph matches "${view.search}"`
                           : `no frame matches "${view.search}"`;
  out.dataset.share = String(share);
}

// Each frame's function: its text without " (file:line)".
function functionsOf(prof) {
  if (!prof.functions) {
    const index = new Map(), names = [];
    const of = Int32Array.from(prof.frames, frame => {
      const name = frame.replace(/ \([^()]*\)$/, '');
      if (!index.has(name)) { index.set(name, names.length); names.push(name); }
      return index.get(name);
    });
    prof.functions = {names, of};
  }
  return prof.functions;
}

// pprof's -top, by function: flat (the function is the leaf) and cum (it
// is on the stack, once per sample however often), for the selection.
function renderTop(prof, sel, total, unit) {
  const {names, of} = functionsOf(prof);
  const flat = new Float64Array(names.length);
  const cum = new Float64Array(names.length);
  const seen = new Int32Array(names.length).fill(-1);
  prof.samples.forEach((s, i) => {
    const value = s.values[sel.type];
    if (!value || !matches(s, sel.sides[0])) return;
    flat[of[s.stack[0]]] += value;
    for (const frame of s.stack) {
      const f = of[frame];
      if (seen[f] !== i) { seen[f] = i; cum[f] += value; }
    }
  });
  const by = flame.topBy || 'flat';
  const order = [...cum.keys()].filter(f => cum[f])
    .sort((a, b) => (by === 'cum' ? cum[b] - cum[a] || flat[b] - flat[a]
                                  : flat[b] - flat[a] || cum[b] - cum[a]));
  let running = 0;
  const rows = order.slice(0, TOP_ROWS).map(f => {
    running += flat[f];
    const tr = document.createElement('tr');
    for (const text of [formatValue(flat[f], unit), percent(flat[f], total),
                        percent(running, total), formatValue(cum[f], unit),
                        percent(cum[f], total), names[f]]) {
      const td = document.createElement('td');
      td.textContent = text;
      tr.append(td);
    }
    tr.lastChild.className = 'value';
    for (const td of [...tr.cells].slice(0, 5)) td.className = 'num';
    return tr;
  });
  $('flame-top-body').replaceChildren(...rows);
  $('flame-top-note').textContent = order.length > TOP_ROWS
    ? `The first ${TOP_ROWS} of ${order.length} functions.` : '';
  for (const th of document.querySelectorAll('#flame-top th[data-sort]'))
    th.setAttribute('aria-sort', th.dataset.sort === by ? 'descending' : 'none');
}

// ---- Pointer --------------------------------------------------------------

function rectAt(event) {
  const box = $('flame-canvas').getBoundingClientRect();
  const x = event.clientX - box.left, y = event.clientY - box.top;
  return flame.rects.find(r => x >= r.x && x < r.x + r.w && y >= r.y && y < r.y + ROW_PX);
}

function describe(node) {
  const view = flame.view, v = view.tree.v, name = frameName(node);
  if (view.totals.length === 2) {
    const a = $('flame-a').value.trim(), b = $('flame-b').value.trim();
    return `${name}: ${percent(v[0][node], view.totals[0])} of ${a}, ` +
           `${percent(v[1][node], view.totals[1])} of ${b}`;
  }
  return `${name}: ${formatValue(v[0][node], view.unit)}, ` +
         `${percent(v[0][node], v[0][0])} of all` +
         (view.zoom ? `, ${percent(v[0][node], v[0][view.zoom])} of the zoomed frame` : '');
}

function onHover(event) {
  const r = flame.view && rectAt(event);
  $('flame-detail').textContent = r ? describe(r.node) : '';
}

// A click zooms into the frame; a click on an ancestor (or the root) zooms
// back out to it.
function onClick(event) {
  const r = flame.view && rectAt(event);
  if (!r) return;
  flame.view.zoom = r.node;
  draw();
}

// ---- Loading --------------------------------------------------------------

// Page-relative URLs, resolved without the page's user part (see index.js).
function endpoint(path) {
  return new URL(path, location.origin + location.pathname);
}

// The profiles taken over a window (CPU, wall) and those read as they are.
function windowed(name) {
  return name === 'profile' || name === 'wall';
}

function profileQuery(name) {
  const seconds = $('flame-seconds').value;
  return windowed(name) ? `${name}?seconds=${encodeURIComponent(seconds)}` : name;
}

// The download link gives the very profile shown, as a data: URL of the
// base64 the JSON carries (proto=1): nothing to decode until it is used.
function setDownload(prof) {
  const link = $('flame-download');
  link.hidden = !prof.proto;
  if (!prof.proto) return;
  const pad = prof.proto.endsWith('==') ? 2 : prof.proto.endsWith('=') ? 1 : 0;
  const bytes = prof.proto.length / 4 * 3 - pad;
  link.href = 'data:application/octet-stream;base64,' + prof.proto;
  link.download = `${prof.name}.pb.gz`;
  link.textContent = `Download this profile (${prof.name}.pb.gz, ${bytes} bytes) for go tool pprof`;
}

function fillTypes(prof) {
  const select = $('flame-type');
  const options = prof.types.map((t, i) => {
    const o = document.createElement('option');
    o.value = String(i);
    o.textContent = `${t.type} (${t.unit})`;
    return o;
  });
  select.replaceChildren(...options);
  const preferred = prof.types.findIndex(t => t.type === prof.defaultType);
  select.value = String(preferred >= 0 ? preferred : prof.types.length - 1);
  const list = $('flame-labels');
  list.replaceChildren(...prof.pairs.map(p => {
    const o = document.createElement('option');
    o.value = p;
    return o;
  }));
}

// Shows a profile read from its JSON text; returns the milliseconds from
// the text to the drawn graph (load() adds the body's transfer and
// gunzip: the response-to-graph time bench/flame.sh prints).
function show(text, name) {
  const start = performance.now();
  flame.prof = prepare(JSON.parse(text), name);
  fillTypes(flame.prof);
  setDownload(flame.prof);
  $('flame-controls').hidden = false;
  render();
  const ms = performance.now() - start;
  $('flame-canvas').dataset.renderMs = ms.toFixed(1);
  return ms;
}
flame.show = show;

async function load(event) {
  event.preventDefault();
  const name = $('flame-profile').value, status = $('flame-status');
  const button = $('flame-load');
  button.disabled = true;
  status.classList.remove('error');
  status.textContent = windowed(name)
    ? `profiling for ${$('flame-seconds').value} s…` : 'loading…';
  try {
    const resp = await fetch(endpoint(profileQuery(name) +
                                      (windowed(name) ? '&' : '?') + 'format=json&proto=1'),
                             {cache: 'no-store'});
    const start = performance.now();
    const text = await resp.text();
    if (!resp.ok) throw new Error(text.trim() || resp.statusText);
    show(text, name);
    const ms = performance.now() - start;
    $('flame-canvas').dataset.responseMs = ms.toFixed(1);
    status.textContent = `${name} as of ${new Date().toLocaleTimeString()}, ` +
                         `drawn ${Math.round(ms)} ms after the response`;
  } catch (err) {
    status.textContent = String(err.message);
    status.classList.add('error');
  } finally {
    button.disabled = false;
  }
}

function showModeInputs() {
  const mode = $('flame-mode').value;
  $('flame-filter-label').hidden = mode === 'diff';
  $('flame-diff-inputs').hidden = mode !== 'diff';
}

function init() {
  $('flame-form').addEventListener('submit', load);
  $('flame-profile').addEventListener('change', () => {
    $('flame-seconds-label').hidden = !windowed($('flame-profile').value);
  });
  $('flame-mode').addEventListener('change', () => { showModeInputs(); render(); });
  for (const id of ['flame-type', 'flame-filter', 'flame-a', 'flame-b', 'flame-icicle'])
    $(id).addEventListener('change', render);
  $('flame-search').addEventListener('input', () => {
    if (!flame.view || $('flame-mode').value === 'top') return;
    setSearch($('flame-search').value);
    draw();
  });
  for (const th of document.querySelectorAll('#flame-top th[data-sort]'))
    th.addEventListener('click', () => { flame.topBy = th.dataset.sort; render(); });
  const canvas = $('flame-canvas');
  canvas.addEventListener('mousemove', onHover);
  canvas.addEventListener('click', onClick);
  window.addEventListener('resize', () => { if (flame.view && !$('flame-graph').hidden) draw(); });
  showModeInputs();
}

init();
})();
