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
const flame = {prof: null, view: null, zoom: null, rects: [], downloadUrl: null};
window.cpprofFlame = flame; // for browser tests and benchmarks

// ---- Reading a profile ----------------------------------------------------

// The profile as the views use it: stacks root first, label pairs listed.
function prepare(json, name) {
  const samples = json.samples.map(s => ({
    stack: Int32Array.from(s.stack).reverse(),
    values: s.values,
    labels: s.labels || {},
  }));
  const pairs = new Set();
  for (const s of samples)
    for (const [k, v] of Object.entries(s.labels)) pairs.add(k + '=' + v);
  return {name, frames: json.frames, samples, types: json.sample_types,
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
  for (const [key, values] of want)
    if (!values.has(sample.labels[key])) return false;
  return true;
}

// ---- The tree -------------------------------------------------------------

function newNode(frame, parent) {
  return {frame, parent, v: [0, 0], kids: new Map(), sorted: null, w: 0};
}

// Merges the samples of each side (sides[i] a filter) into one tree; v[i]
// is side i's value at that node.  Returns the root and each side's total.
function buildTree(prof, type, sides) {
  const root = newNode(-1, null);
  const totals = sides.map(() => 0);
  for (const s of prof.samples) {
    const value = s.values[type];
    for (let side = 0; side < sides.length; side++) {
      if (!value || !matches(s, sides[side])) continue;
      totals[side] += value;
      let node = root;
      node.v[side] += value;
      for (const frame of s.stack) {
        let kid = node.kids.get(frame);
        if (!kid) node.kids.set(frame, kid = newNode(frame, node));
        kid.v[side] += value;
        node = kid;
      }
    }
  }
  return {root, totals};
}

// A node's callees, widest first (sorted once, when first drawn).
function kidsOf(node) {
  if (!node.sorted) node.sorted = [...node.kids.values()].sort((a, b) => b.w - a.w);
  return node.sorted;
}

// Widths: the value itself, or for a diff the mean of the two sides'
// shares, so that each side counts as much whatever its total.
function weigh(node, totals) {
  node.w = totals.length === 1 ? node.v[0]
    : (node.v[0] / (totals[0] || 1) + node.v[1] / (totals[1] || 1)) / 2;
  for (const kid of node.kids.values()) weigh(kid, totals);
}

// ---- Drawing --------------------------------------------------------------

function hue(name) {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
  return h;
}

function colour(view, node, name) {
  if (view.search && name.toLowerCase().includes(view.search)) return '#c026d3';
  if (view.totals.length === 2) {
    const a = node.v[0] / (view.totals[0] || 1), b = node.v[1] / (view.totals[1] || 1);
    const d = Math.max(-1, Math.min(1, (a - b) / Math.max(a, b, 1e-12)));
    const light = 92 - 42 * Math.abs(d);
    return d >= 0 ? `hsl(0, 80%, ${light}%)` : `hsl(215, 80%, ${light}%)`;
  }
  const h = hue(name) >>> 0;
  return `hsl(${10 + h % 40}, ${70 + h % 20}%, ${55 + (h >> 8) % 15}%)`;
}

// The rectangles to draw: the zoomed node's ancestors full width, then its
// subtree scaled to the width, frames under MIN_PX left out.
function layout(view, width) {
  const rects = [];
  const path = [];
  for (let n = view.zoom; n; n = n.parent) path.unshift(n);
  path.forEach((node, depth) => rects.push({node, depth, x: 0, w: width}));
  const scale = width / (view.zoom.w || 1);
  const walk = (node, depth, x) => {
    for (const kid of kidsOf(node)) {
      const w = kid.w * scale;
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
  return node.frame < 0 ? 'all' : flame.prof.frames[node.frame];
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
  canvas.dataset.rootValue = String(view.root.v[0]);
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
  const {root, totals} = buildTree(prof, sel.type, sel.sides);
  const empty = totals.findIndex(t => t === 0);
  if (empty >= 0) {
    message(sel.texts[empty].trim()
      ? `No sample matches ${sel.texts[empty].trim()} in this profile.`
      : 'This profile has no samples of this type.');
    setGraphShown(false);
    top.hidden = true;
    return;
  }
  weigh(root, totals);
  const unit = prof.types[sel.type].unit;
  flame.view = {root, totals, zoom: root, unit, icicle: $('flame-icicle').checked,
                search: $('flame-search').value.trim().toLowerCase()};
  message(sel.mode === 'diff'
    ? `${sel.texts[0]}: ${formatValue(totals[0], unit)} against ` +
      `${sel.texts[1]}: ${formatValue(totals[1], unit)}, each as a share of ` +
      `its own total. Red: a larger share in ${sel.texts[0]}; blue: in ${sel.texts[1]}.`
    : `${formatValue(totals[0], unit)} in all.`);
  setGraphShown(sel.mode !== 'top');
  top.hidden = sel.mode !== 'top';
  if (sel.mode === 'top') renderTop(prof, sel, totals[0], unit);
  else { draw(); showSearch(); }
  $('flame-detail').textContent = '';
}

// The search box: frames whose name holds the text are drawn highlighted;
// their share counts each sample once (a match inside a match is not added).
function showSearch() {
  const view = flame.view, out = $('flame-found');
  if (!view.search) { out.textContent = ''; return; }
  let found = 0, frames = 0;
  const walk = node => {
    if (node.frame >= 0 && flame.prof.frames[node.frame].toLowerCase().includes(view.search)) {
      found += node.w;
      frames++;
      return;
    }
    for (const kid of node.kids.values()) walk(kid);
  };
  walk(view.root);
  out.textContent = frames
    ? `${percent(found, view.root.w)} of the graph matches "${view.search}"`
    : `no frame matches "${view.search}"`;
  out.dataset.share = String(found / (view.root.w || 1));
}

// pprof's -top: flat (the frame is the leaf) and cum (the frame is on the
// stack, once per sample however often), for the selection.
function renderTop(prof, sel, total, unit) {
  const flat = new Float64Array(prof.frames.length);
  const cum = new Float64Array(prof.frames.length);
  const seen = new Int32Array(prof.frames.length).fill(-1);
  prof.samples.forEach((s, i) => {
    const value = s.values[sel.type];
    if (!value || !matches(s, sel.sides[0])) return;
    flat[s.stack[s.stack.length - 1]] += value;
    for (const f of s.stack)
      if (seen[f] !== i) { seen[f] = i; cum[f] += value; }
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
                        percent(cum[f], total), prof.frames[f]]) {
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
  const view = flame.view, name = frameName(node);
  if (view.totals.length === 2) {
    const a = $('flame-a').value.trim(), b = $('flame-b').value.trim();
    return `${name}: ${percent(node.v[0], view.totals[0])} of ${a}, ` +
           `${percent(node.v[1], view.totals[1])} of ${b}`;
  }
  return `${name}: ${formatValue(node.v[0], view.unit)}, ` +
         `${percent(node.v[0], view.root.v[0])} of all` +
         (view.zoom !== view.root ? `, ${percent(node.v[0], view.zoom.v[0])} of the zoomed frame` : '');
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

function profileQuery(name) {
  const seconds = $('flame-seconds').value;
  return name === 'profile' ? `profile?seconds=${encodeURIComponent(seconds)}` : name;
}

function setDownload(prof) {
  const link = $('flame-download');
  if (flame.downloadUrl) URL.revokeObjectURL(flame.downloadUrl);
  flame.downloadUrl = null;
  link.hidden = !prof.proto;
  if (!prof.proto) return;
  const bytes = Uint8Array.from(atob(prof.proto), c => c.charCodeAt(0));
  flame.downloadUrl = URL.createObjectURL(new Blob([bytes], {type: 'application/octet-stream'}));
  link.href = flame.downloadUrl;
  link.download = `${prof.name}.pb.gz`;
  link.textContent = `Download this profile (${prof.name}.pb.gz, ${bytes.length} bytes) for go tool pprof`;
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
// the text to the drawn graph (what bench/flame.sh measures).
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
  status.textContent = name === 'profile'
    ? `profiling for ${$('flame-seconds').value} s…` : 'loading…';
  try {
    const resp = await fetch(endpoint(profileQuery(name) +
                                      (name === 'profile' ? '&' : '?') + 'format=json&proto=1'),
                             {cache: 'no-store'});
    const text = await resp.text();
    if (!resp.ok) throw new Error(text.trim() || resp.statusText);
    const ms = show(text, name);
    status.textContent = `${name} as of ${new Date().toLocaleTimeString()}, ` +
                         `drawn in ${Math.round(ms)} ms`;
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
    $('flame-seconds-label').hidden = $('flame-profile').value !== 'profile';
  });
  $('flame-mode').addEventListener('change', () => { showModeInputs(); render(); });
  for (const id of ['flame-type', 'flame-filter', 'flame-a', 'flame-b', 'flame-icicle'])
    $(id).addEventListener('change', render);
  $('flame-search').addEventListener('input', () => {
    if (!flame.view || $('flame-mode').value === 'top') return;
    flame.view.search = $('flame-search').value.trim().toLowerCase();
    draw();
    showSearch();
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
