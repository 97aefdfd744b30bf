// The timeline view of /debug/pprof/: a window of /debug/pprof/trace in its
// JSON form (Chrome's trace events, format=json) drawn on one canvas, one
// lane per thread and per task: label spans coloured by the value of a
// label key the user picks, regions and lock waits as thinner bars under
// them, CPU samples as ticks, logs as markers.  Hovering tells a span's
// labels, duration and, for a CPU sample or a lock wait, its stack; the
// wheel or a drag zooms, dragging the time ruler or shift+wheel pans.
//
// Hand-written for the same reasons as flame.js (www/README): a few hundred
// lines, no third-party code in the library.  Thread names, label values,
// regions, logs and frames come from the program: they are drawn with
// fillText or set with textContent, never parsed as HTML.  One function
// scope, so that nothing here collides with the other scripts' names.
(() => {
'use strict';

const RULER_PX = 22;     // the time axis above the lanes
const LANE_PX = 34;      // one lane: span row, bar row, tick row
const GUTTER_PX = 170;   // lane names, left of the plot
const ROWS = [           // each row's top and height within a lane
  {y: 3, h: 15},         // 0: label spans, task runs
  {y: 20, h: 6},         // 1: regions, lock waits
  {y: 27, h: 6},         // 2: CPU samples, logs, thread start and exit
];
const SLOP_PX = 3;       // how near an instant the pointer must be
const MIN_SPAN_US = 1;   // the deepest zoom: a microsecond across the plot
const TASK_LANE = 1e9;   // task lanes' tids are 1e9 + the task's number
const OWN_KEY = 'pprof_internal'; // the label of cpprof's own threads
const STACK_LINES = 24;  // frames a tooltip shows
// Distinct colours for the first label values; later ones are spread
// round the colour wheel.  Grey is kept for spans without the key.
const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2',
                 '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#8cd17d'];
const NO_VALUE = '#c8ccd2';
// Dark, so that the bars are not read as label values of the palette.
const BAR_COLOURS = {region: '#006d77', mutex: '#9b1d20', block: '#3d405b'};

const $ = id => document.getElementById(id);
const trace = {data: null, view: null, lanes: [], hits: []};
window.cpprofTrace = trace; // for browser tests
trace.layout = {RULER_PX, LANE_PX, GUTTER_PX};

// ---- Reading a trace ------------------------------------------------------

function newLane(tid) {
  return {tid, name: '', spans: [], bars: [], ticks: []};
}

// The trace as the view draws it: lanes (threads by tid, then tasks by
// number), each with its events in time order and in the row they are
// drawn in; the window; and the label keys the spans carry, commonest
// first.
function prepare(json) {
  const other = json.otherData || {};
  const lanes = new Map();
  const laneOf = tid => lanes.get(tid) || lanes.set(tid, newLane(tid)).get(tid);
  let process = '', first = Infinity, last = -Infinity;
  for (const e of json.traceEvents || []) {
    if (e.ph === 'M') {
      if (e.name === 'process_name') process = (e.args && e.args.name) || '';
      else if (e.name === 'thread_name' && e.tid !== undefined)
        laneOf(e.tid).name = (e.args && e.args.name) || '';
      continue;
    }
    if (e.tid === undefined || typeof e.ts !== 'number') continue;
    const item = {e, t0: e.ts, t1: e.ts + (e.dur || 0)};
    first = Math.min(first, item.t0);
    last = Math.max(last, item.t1);
    const lane = laneOf(e.tid);
    if (e.cat === 'labels' || e.cat === 'task') lane.spans.push(item);
    else if (e.ph === 'X') lane.bars.push(item);
    else lane.ticks.push(item);
  }
  const keyCounts = new Map();
  const byStart = (a, b) => a.t0 - b.t0;
  for (const lane of lanes.values()) {
    lane.spans.sort(byStart);
    lane.bars.sort(byStart);
    lane.ticks.sort(byStart);
    for (const s of lane.spans)
      for (const k of Object.keys(labelsOf(s.e)))
        keyCounts.set(k, (keyCounts.get(k) || 0) + 1);
    // cpprof's own threads (its server, sampler...) carry OWN_KEY all
    // through: drawn only when asked for, after the program's.
    lane.own = lane.spans.length > 0 && lane.spans.every(s => OWN_KEY in labelsOf(s.e));
    lane.label = lane.tid >= TASK_LANE
      ? lane.name || `task ${lane.tid - TASK_LANE}`
      : `${lane.name || 'thread'} ${lane.tid}`;
  }
  const order = (a, b) => a.own - b.own || (a.tid >= TASK_LANE) - (b.tid >= TASK_LANE) ||
                         a.tid - b.tid;
  const start = typeof other.start_ns === 'number' ? other.start_ns / 1e3 : first;
  const end = typeof other.end_ns === 'number' ? other.end_ns / 1e3 : last;
  return {
    process, lanes: [...lanes.values()].sort(order),
    start: Number.isFinite(start) ? start : 0,
    end: Number.isFinite(end) && end > start ? end : start + MIN_SPAN_US,
    keys: [...keyCounts.keys()].sort((a, b) => keyCounts.get(b) - keyCounts.get(a) || a.localeCompare(b)),
    dropped: Number(other.dropped) || 0,
    cpuSamples: other.cpu_samples !== false,
    flight: other.flight === true,
  };
}

function labelsOf(e) {
  return (e.args && e.args.labels) || {};
}

// ---- Colours --------------------------------------------------------------

// The values of `key` across all spans, sorted, each with its colour: the
// same value has the same colour on every lane.
function colourValues(data, key) {
  const values = new Set();
  for (const lane of data.lanes)
    for (const s of lane.spans) {
      const v = labelsOf(s.e)[key];
      if (v !== undefined) values.add(v);
    }
  const colours = new Map();
  [...values].sort().forEach((v, i) => colours.set(v,
    i < PALETTE.length ? PALETTE[i] : `hsl(${(i * 137.5) % 360}, 55%, 62%)`));
  return colours;
}

function spanColour(view, item) {
  const v = labelsOf(item.e)[view.key];
  return v === undefined ? NO_VALUE : view.colours.get(v);
}

// ---- Drawing --------------------------------------------------------------

function fmtDuration(us) {
  if (us === 0) return '0';
  if (us >= 1e6) return (us / 1e6).toFixed(3) + ' s';
  if (us >= 1e3) return (us / 1e3).toFixed(3) + ' ms';
  return us.toFixed(us < 10 ? 2 : 1) + ' µs';
}

// A ruler step of 1, 2 or 5 times a power of ten, about `px` pixels apart.
function rulerStep(spanUs, plotPx, px) {
  const raw = spanUs * px / Math.max(plotPx, 1);
  const pow = Math.pow(10, Math.floor(Math.log10(raw)));
  return [1, 2, 5, 10].map(m => m * pow).find(s => s >= raw);
}

// A ruler mark: the offset from the window's start in the unit of the
// step, with as many decimals as the step needs (0, 50 ms, 100 ms...).
function fmtMark(us, step) {
  const [div, unit] = step >= 1e6 ? [1e6, 's'] : step >= 1e3 ? [1e3, 'ms'] : [1, 'µs'];
  const decimals = Math.max(0, -Math.floor(Math.log10(step / div) + 1e-9));
  return us === 0 ? '0' : (us / div).toFixed(decimals) + ' ' + unit;
}

function drawRuler(g, view, width) {
  const plot = width - GUTTER_PX, span = view.t1 - view.t0, start = trace.data.start;
  const step = rulerStep(span, plot, 90);
  g.fillStyle = '#5f6368';
  g.strokeStyle = '#9aa0a6';
  g.textBaseline = 'middle';
  g.fillText(view.t0 > start ? `view from +${fmtDuration(view.t0 - start)}` : 'from the start',
             4, RULER_PX / 2);
  const first = Math.ceil((view.t0 - start) / step);
  for (let i = first; start + i * step <= view.t1; i++) {
    const x = Math.round(xOf(view, width, start + i * step)) + 0.5;
    g.beginPath();
    g.moveTo(x, RULER_PX - 6);
    g.lineTo(x, RULER_PX);
    g.stroke();
    g.fillText(fmtMark(i * step, step), x + 3, RULER_PX / 2);
  }
}

function xOf(view, width, t) {
  return GUTTER_PX + (t - view.t0) * (width - GUTTER_PX) / (view.t1 - view.t0);
}

function timeOf(view, width, x) {
  return view.t0 + (x - GUTTER_PX) * (view.t1 - view.t0) / (width - GUTTER_PX);
}

// The text on a label span: its value of the colour key, else its name.
function spanText(view, item) {
  const v = labelsOf(item.e)[view.key];
  return v !== undefined ? v : item.e.name || '';
}

// Draws the spans of one row that meet the view, each at least a pixel
// wide, and records where they are for the pointer.  Items are in time
// order, so the first to start after the view ends the row; of spans
// narrower than a pixel, a run of one colour in one pixel is painted once
// (a minute of jobs is a few hundred thousand of them).
function drawSpans(g, view, width, items, y, h, colourOf, hits, text) {
  let lastPx = -1, lastColour = '';
  for (const item of items) {
    if (item.t0 > view.t1) break;
    if (item.t1 < view.t0) continue;
    const x0 = Math.max(GUTTER_PX, xOf(view, width, item.t0));
    const x1 = Math.min(width, Math.max(xOf(view, width, item.t1), x0 + 1));
    const colour = colourOf(item), px = Math.floor(x0);
    if (x1 - x0 > 1 || px !== lastPx || colour !== lastColour) {
      g.fillStyle = colour;
      g.fillRect(x0, y, x1 - x0, h);
      lastPx = px;
      lastColour = colour;
    }
    hits.push({x0, x1, y, h, item});
    if (text && x1 - x0 > 30) {
      g.save();
      g.beginPath();
      g.rect(x0, y, x1 - x0 - 2, h);
      g.clip();
      g.fillStyle = '#111';
      g.fillText(text(item), x0 + 3, y + h / 2 + 1);
      g.restore();
    }
  }
}

// Instants: a CPU sample is a tick, a log a triangle, a thread's start or
// exit a taller line.
function drawTicks(g, view, width, items, laneY, hits) {
  const row = ROWS[2];
  for (const item of items) {
    if (item.t0 > view.t1) break;
    if (item.t0 < view.t0) continue;
    const x = Math.round(xOf(view, width, item.t0));
    const cat = item.e.cat;
    if (cat === 'log') {
      g.fillStyle = '#7b2cbf';
      g.beginPath();
      g.moveTo(x - 4, laneY + row.y);
      g.lineTo(x + 4, laneY + row.y);
      g.lineTo(x, laneY + row.y + row.h);
      g.fill();
    } else if (cat === 'thread') {
      g.fillStyle = '#111';
      g.fillRect(x, laneY + ROWS[0].y, 2, LANE_PX - ROWS[0].y - 1);
    } else {
      g.fillStyle = '#333';
      g.fillRect(x, laneY + row.y, 1, row.h);
    }
    hits.push({x0: x - SLOP_PX, x1: x + SLOP_PX + 1, y: laneY + row.y, h: row.h,
               item, instant: true});
  }
}

function draw() {
  const data = trace.data, view = trace.view, canvas = $('trace-canvas');
  const width = Math.max(canvas.parentElement.clientWidth, GUTTER_PX + 100);
  view.width = width;
  trace.lanes = data.lanes.filter(l => !l.own || $('trace-own').checked);
  view.height = RULER_PX + trace.lanes.length * LANE_PX;
  const ratio = window.devicePixelRatio || 1;
  canvas.style.width = width + 'px';
  canvas.style.height = view.height + 'px';
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(view.height * ratio);
  const g = canvas.getContext('2d');
  g.scale(ratio, ratio);
  g.font = '11px system-ui, sans-serif';
  drawRuler(g, view, width);
  trace.hits = [];
  let spans = 0;
  trace.lanes.forEach((lane, i) => {
    const y = RULER_PX + i * LANE_PX;
    g.fillStyle = i % 2 ? '#f6f7f9' : '#fff';
    g.fillRect(0, y, width, LANE_PX);
    g.save();
    g.beginPath();
    g.rect(0, y, GUTTER_PX - 6, LANE_PX);
    g.clip();
    g.fillStyle = '#1d1d1f';
    g.textBaseline = 'middle';
    g.fillText(lane.label, 4, y + LANE_PX / 2);
    g.restore();
    const rows = [[], [], []];
    g.save();
    g.beginPath();
    g.rect(GUTTER_PX, y, width - GUTTER_PX, LANE_PX);
    g.clip();
    drawSpans(g, view, width, lane.spans, y + ROWS[0].y, ROWS[0].h,
              item => spanColour(view, item), rows[0], item => spanText(view, item));
    drawSpans(g, view, width, lane.bars, y + ROWS[1].y, ROWS[1].h,
              item => BAR_COLOURS[item.e.cat] || '#888', rows[1], null);
    drawTicks(g, view, width, lane.ticks, y, rows[2]);
    g.restore();
    spans += rows[0].length;
    trace.hits.push(rows);
  });
  canvas.dataset.lanes = String(trace.lanes.length);
  canvas.dataset.spans = String(spans);
  canvas.dataset.t0 = String(view.t0);
  canvas.dataset.t1 = String(view.t1);
}

// ---- The legend and the notes ---------------------------------------------

// el(): index.js's, which the page loads first.

function swatch(colour) {
  const s = el('span', {class: 'swatch'});
  s.style.background = colour;
  return s;
}

function renderLegend(view) {
  const items = [...view.colours].map(([value, colour]) =>
    el('li', {'data-value': value}, swatch(colour), `${view.key}=${value}`));
  items.push(el('li', {}, swatch(NO_VALUE), `no ${view.key || 'labels'}`));
  for (const [cat, colour] of Object.entries(BAR_COLOURS))
    items.push(el('li', {class: 'bar-kind'}, swatch(colour),
                  cat === 'region' ? 'region' : `${cat} wait`));
  $('trace-legend').replaceChildren(...items);
}

function fillKeys(data) {
  const select = $('trace-key');
  select.replaceChildren(...[...data.keys].sort().map(k => el('option', {value: k}, k)));
  // tenant when there is one (the demo's and the docs' key), else the
  // commonest key.
  select.value = data.keys.includes('tenant') ? 'tenant' : data.keys[0] || '';
  select.disabled = !data.keys.length;
}

// What the window holds beyond its events: lost records, no CPU samples.
function renderNotes(data) {
  const notes = [];
  const own = data.lanes.filter(l => l.own).length;
  notes.push(`${data.lanes.length - own} lanes over ${fmtDuration(data.end - data.start)}` +
             (data.process ? ` of ${data.process}` : '') +
             (data.flight ? ', from the flight recorder' : '') +
             (own ? `, and ${own} of cpprof's own threads (${OWN_KEY}).` : '.'));
  if (data.dropped)
    notes.push(`${data.dropped} events were dropped: the recorder's buffers ` +
               'were full (setting trace_kb), so some lanes miss events.');
  if (!data.cpuSamples)
    notes.push('No CPU samples: the CPU sampler did not run during this ' +
               'window (asked with cpu=0, or declined: see the profile row ' +
               'of the table above).');
  $('trace-notes').replaceChildren(...notes.map(n => el('p', {class: 'note'}, n)));
  $('trace-notes').dataset.dropped = String(data.dropped);
  $('trace-notes').dataset.cpuSamples = String(data.cpuSamples);
}

// ---- The tooltip ----------------------------------------------------------

function labelLines(labels) {
  return Object.keys(labels).sort().map(k => `${k}=${labels[k]}`);
}

function stackLines(e) {
  const stack = (e.args && e.args.stack) || [];
  const lines = stack.slice(0, STACK_LINES).map(f => '  ' + f);
  if (stack.length > STACK_LINES) lines.push(`  … ${stack.length - STACK_LINES} more`);
  return stack.length ? ['stack:', ...lines] : [];
}

// The tooltip's lines for one event, as the user needs them: what it is,
// its labels, how long, where, and its stack.
function describe(item, lane) {
  const e = item.e, lines = [];
  const when = `on ${lane.label} at +${fmtDuration(item.t0 - trace.data.start)}`;
  const dur = `duration ${fmtDuration(item.t1 - item.t0)}`;
  const labels = labelLines(labelsOf(e));
  switch (e.cat) {
  case 'labels':
    lines.push(...(labels.length ? labels : ['no labels']), dur, when);
    break;
  case 'task':
    lines.push(e.name, ...labels, dur,
               ...(e.args && e.args.tid ? [`run on thread ${e.args.tid}`] : []),
               e.args && e.args.reason ? `then parked: ${e.args.reason}` : 'then ended', when);
    break;
  case 'region':
    lines.push(`region ${e.name}`, dur, when);
    break;
  case 'mutex':
  case 'block':
    lines.push(e.cat === 'mutex' ? 'lock wait (mutex: a holder made it wait)'
                                 : 'lock wait (block: waiting for a condition)',
               dur, when, ...stackLines(e));
    break;
  case 'cpu':
    lines.push('CPU sample', ...labels, when, ...stackLines(e));
    break;
  case 'log':
    lines.push(`log ${e.name}: ${(e.args && e.args.message) || ''}`, when);
    break;
  default:
    lines.push(e.name || e.cat || 'event', ...(e.dur ? [dur] : []), when);
  }
  return lines.join('\n');
}

// The event under the pointer: the lane and row by height, then the
// instant nearest to x, or the span holding x that began last (the
// innermost of nested regions).
function hitAt(x, y) {
  const lane = Math.floor((y - RULER_PX) / LANE_PX);
  if (lane < 0 || lane >= trace.hits.length || x < GUTTER_PX) return null;
  const within = y - RULER_PX - lane * LANE_PX;
  const row = ROWS.findIndex(r => within >= r.y - 1 && within < r.y + r.h + 1);
  if (row < 0) return null;
  let best = null, bestD = Infinity;
  for (const h of trace.hits[lane][row]) {
    if (x < h.x0 || x >= h.x1) continue;
    const d = h.instant ? Math.abs((h.x0 + h.x1) / 2 - x) : 0;
    if (d < bestD || (d === bestD && !h.instant)) { best = h; bestD = d; }
  }
  return best && {hit: best, lane: trace.lanes[lane]};
}

function showTip(event) {
  const tip = $('trace-tip');
  const box = $('trace-canvas').getBoundingClientRect();
  const x = event.clientX - box.left, y = event.clientY - box.top;
  const found = trace.view && hitAt(x, y);
  if (!found) { tip.hidden = true; return; }
  tip.textContent = describe(found.hit.item, found.lane);
  tip.hidden = false;
  // Beside the pointer, kept inside the view.
  const room = box.width - tip.offsetWidth - 4;
  tip.style.left = Math.max(0, Math.min(x + 14, room)) + 'px';
  const below = y + 16, above = y - tip.offsetHeight - 8;
  tip.style.top = (below + tip.offsetHeight > box.height && above >= 0 ? above : below) + 'px';
}

// ---- Zoom and pan ---------------------------------------------------------

// Sets the view to [t0, t1], no narrower than MIN_SPAN_US and inside the
// window.
function setRange(t0, t1) {
  const data = trace.data, full = data.end - data.start;
  let span = Math.min(Math.max(t1 - t0, MIN_SPAN_US), full);
  t0 = Math.min(Math.max(t0, data.start), data.end - span);
  trace.view.t0 = t0;
  trace.view.t1 = t0 + span;
  draw();
}

function resetZoom() {
  if (trace.data) setRange(trace.data.start, trace.data.end);
}

function pointerX(event) {
  return event.clientX - $('trace-canvas').getBoundingClientRect().left;
}

// The wheel zooms about the pointer; shift+wheel, or a sideways scroll,
// pans.  A page scrolled with the wheel is not held up by the canvas
// once the whole window is shown.
function onWheel(event) {
  const view = trace.view;
  if (!view) return;
  const span = view.t1 - view.t0, whole = trace.data.end - trace.data.start;
  const sideways = event.shiftKey || Math.abs(event.deltaX) > Math.abs(event.deltaY);
  // Zooming out of the whole window has nothing to do: the page scrolls.
  if (!sideways && event.deltaY > 0 && span >= whole) return;
  event.preventDefault();
  const perPx = span / (view.width - GUTTER_PX);
  if (sideways) {
    const d = event.shiftKey && !event.deltaX ? event.deltaY : event.deltaX;
    setRange(view.t0 + d * perPx, view.t1 + d * perPx);
    return;
  }
  const at = timeOf(view, view.width, Math.max(pointerX(event), GUTTER_PX));
  const factor = Math.exp(event.deltaY * 0.002);
  setRange(at - (at - view.t0) * factor, at + (view.t1 - at) * factor);
}

// A drag across the lanes selects a range to zoom into; a drag along the
// ruler moves the view.
function onDown(event) {
  if (!trace.view || event.button !== 0) return;
  const box = $('trace-canvas').getBoundingClientRect();
  const x = event.clientX - box.left, y = event.clientY - box.top;
  if (x < GUTTER_PX) return;
  event.preventDefault();
  trace.drag = {x, pan: y < RULER_PX, t0: trace.view.t0, t1: trace.view.t1};
}

function onMove(event) {
  const drag = trace.drag, view = trace.view;
  if (!drag) { showTip(event); return; }
  const x = Math.max(GUTTER_PX, Math.min(pointerX(event), view.width));
  if (drag.pan) {
    const d = (drag.x - x) * (drag.t1 - drag.t0) / (view.width - GUTTER_PX);
    setRange(drag.t0 + d, drag.t1 + d);
    return;
  }
  const sel = $('trace-select');
  sel.hidden = false;
  sel.style.left = Math.min(drag.x, x) + 'px';
  sel.style.width = Math.abs(x - drag.x) + 'px';
  sel.style.height = view.height + 'px';
  $('trace-tip').hidden = true;
}

function onUp(event) {
  const drag = trace.drag;
  if (!drag) return;
  trace.drag = null;
  $('trace-select').hidden = true;
  if (drag.pan) return;
  const view = trace.view;
  const x = Math.max(GUTTER_PX, Math.min(pointerX(event), view.width));
  if (Math.abs(x - drag.x) < 4) return; // a click, not a selection
  const a = timeOf(view, view.width, Math.min(drag.x, x));
  const b = timeOf(view, view.width, Math.max(drag.x, x));
  setRange(a, b);
}

// ---- Loading --------------------------------------------------------------

// Page-relative URLs, resolved without the page's user part (see index.js).
function endpoint(path) {
  return new URL(path, location.origin + location.pathname);
}

function seconds() {
  return encodeURIComponent($('trace-seconds').value);
}

// The Perfetto link records a window of its own, of the seconds chosen.
function setDownload() {
  const link = $('trace-download');
  link.href = endpoint('trace?seconds=' + seconds()).href;
  link.textContent = `Download a ${$('trace-seconds').value} s trace for Perfetto`;
}

function setKey(key) {
  const view = trace.view;
  view.key = key;
  view.colours = colourValues(trace.data, key);
  renderLegend(view);
  draw();
}

// Shows a trace read from its JSON text.
function show(text) {
  trace.data = prepare(JSON.parse(text));
  trace.view = {t0: trace.data.start, t1: trace.data.end, key: '', colours: new Map()};
  fillKeys(trace.data);
  renderNotes(trace.data);
  $('trace-graph').hidden = false;
  $('trace-controls').hidden = false;
  $('trace-tip').hidden = true;
  setKey($('trace-key').value);
}
trace.show = show;

// Reads a trace and shows it: a window of the seconds chosen (the Trace
// button), or the flight recorder's last seconds, at once.
async function load(query, doing) {
  const buttons = [$('trace-load'), $('trace-flight')], status = $('trace-status');
  buttons.forEach(b => { b.disabled = true; });
  status.classList.remove('error');
  status.textContent = doing;
  try {
    const resp = await fetch(endpoint('trace?' + query + '&format=json'), {cache: 'no-store'});
    const text = await resp.text();
    if (!resp.ok) throw new Error(text.trim() || resp.statusText);
    show(text);
    status.textContent = 'as of ' + new Date().toLocaleTimeString();
  } catch (err) {
    status.textContent = String(err.message);
    status.classList.add('error');
  } finally {
    buttons.forEach(b => { b.disabled = false; });
  }
}

function traceWindow(event) {
  event.preventDefault();
  load('seconds=' + seconds(), `tracing for ${$('trace-seconds').value} s…`);
}

function init() {
  $('trace-form').addEventListener('submit', traceWindow);
  $('trace-flight').addEventListener('click', () => load('flight=1', 'reading the flight recorder…'));
  $('trace-seconds').addEventListener('input', setDownload);
  $('trace-key').addEventListener('change', () => setKey($('trace-key').value));
  $('trace-own').addEventListener('change', () => { if (trace.view) draw(); });
  $('trace-reset').addEventListener('click', resetZoom);
  const canvas = $('trace-canvas');
  canvas.addEventListener('wheel', onWheel, {passive: false});
  canvas.addEventListener('mousedown', onDown);
  canvas.addEventListener('mouseleave', () => { if (!trace.drag) $('trace-tip').hidden = true; });
  window.addEventListener('mousemove', event => {
    if (trace.drag || event.target === canvas) onMove(event);
  });
  window.addEventListener('mouseup', onUp);
  window.addEventListener('resize', () => { if (trace.view && !$('trace-graph').hidden) draw(); });
  setDownload();
}

init();
})();
