// The labels view of /debug/pprof/: tables of label key -> value -> share,
// rendered from /debug/pprof/labels (thread census, refreshed every
// CENSUS_EVERY_MS) and /debug/pprof/labels?seconds=N (CPU, on request),
// or that CPU share beside the wall profile's (wall?seconds=N, the same
// window), per label value.
// Plain DOM calls and textContent only: label values come from the
// program and are never parsed as HTML.
'use strict';

const CENSUS_EVERY_MS = 5000;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children)
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function percent(share) {
  return (100 * share).toFixed(1) + '%';
}

// A table row: name, count, share with a bar; attrs mark it.
function shareRow(attrs, name, count, share) {
  const bar = el('div', {class: 'bar'});
  bar.style.width = percent(share);
  return el('tr', attrs,
    el('td', {class: 'value'}, name),
    el('td', {class: 'num'}, count),
    el('td', {class: 'num'}, percent(share)),
    el('td', {class: 'share'}, bar));
}

function shareTable(attrs, caption, first, unit, body) {
  return el('table', attrs,
    el('caption', {}, caption),
    el('thead', {}, el('tr', {},
      el('th', {}, first), el('th', {class: 'num'}, unit),
      el('th', {class: 'num'}, 'share'), el('th', {}, ''))),
    body);
}

// Whose the threads (or CPU samples) are, before the tables by label: the
// program's with labels, the program's without any, and cpprof's own
// (pprof_internal), so that a program that labels nothing does not see
// cpprof's threads as the only ones it has.
function renderWhose(summary, unit) {
  const own = Object.values(summary.labels.pprof_internal || {})
    .reduce((n, v) => n + v.count, 0);
  const bare = summary.unlabelled ? summary.unlabelled.count : 0;
  const program = summary.total - own;
  const body = el('tbody');
  for (const [whose, name, count] of [
    ['labelled', 'the program, with labels', program - bare],
    ['unlabelled', 'the program, without labels', bare],
    ['cpprof', "cpprof's own (pprof_internal)", own]]) {
    body.append(shareRow({'data-whose': whose}, name, count,
                         summary.total ? count / summary.total : 0));
  }
  const note = el('p', {class: 'note'}, program > 0
    ? `${percent(bare / program)} of the program's ${unit} carry no label.`
    : `None of the ${unit} is the program's.`);
  return [shareTable({class: 'labelkey whose'}, 'whose ' + unit, 'whose',
                     unit, body),
          note];
}

// One table per label key: value, count, share with a bar.
function renderSummary(target, summary, unit) {
  const keys = Object.keys(summary.labels).sort();
  const parts = [el('p', {class: 'note'},
    `${summary.total} ${unit} in all` +
    (summary.seconds ? ` over ${summary.seconds} s` : '') +
    (keys.length ? '' : '; none carries labels'))];
  if (summary.unlabelled) parts.push(...renderWhose(summary, unit));
  for (const key of keys) {
    const values = summary.labels[key];
    const body = el('tbody');
    const names = Object.keys(values)
      .sort((a, b) => values[b].count - values[a].count || a.localeCompare(b));
    for (const v of names) {
      const {count, share} = values[v];
      body.append(shareRow({'data-key': key, 'data-value': v}, v, count, share));
    }
    parts.push(shareTable({class: 'labelkey', 'data-key': key}, key, 'value',
                          unit, body));
  }
  target.replaceChildren(...parts);
}

// A page opened as https://user:TOKEN@host/debug/pprof/ holds the token in
// its own address, and a relative URL would inherit it: fetch() refuses
// such a URL, and the page must never build one.  So URLs are resolved
// against the address without its user part; the browser sends the Basic
// credentials it keeps for this server by itself.
async function fetchSummary(url) {
  const page = location.origin + location.pathname;
  const resp = await fetch(new URL(url, page), {cache: 'no-store'});
  if (!resp.ok) throw new Error((await resp.text()).trim() || resp.statusText);
  return resp.json();
}

// The parked tasks of the same summary (docs/tasks.md): none is the rule
// for a program that does not use tasks.
function renderTasks(target, tasks) {
  if (!tasks || !tasks.total) {
    target.replaceChildren(el('p', {class: 'note'},
      'No parked tasks: work run as tasks (cpprof_task_*, C++ coroutines) ' +
      'shows here while it waits.'));
    return;
  }
  renderSummary(target, tasks, 'tasks');
}

async function refreshCensus() {
  const status = document.getElementById('census-status');
  try {
    const summary = await fetchSummary('labels');
    renderSummary(document.getElementById('census'), summary, 'threads');
    renderTasks(document.getElementById('tasks'), summary.tasks);
    status.textContent = 'as of ' + new Date().toLocaleTimeString();
    status.classList.remove('error');
  } catch (err) {
    status.textContent = String(err.message);
    status.classList.add('error');
  }
  setTimeout(refreshCensus, CENSUS_EVERY_MS);
}

async function profileCpu(event) {
  event.preventDefault();
  const seconds = document.getElementById('cpu-seconds').value;
  const button = document.getElementById('cpu-start');
  const status = document.getElementById('cpu-status');
  button.disabled = true;
  status.classList.remove('error');
  status.textContent = `profiling for ${seconds} s…`;
  try {
    const url = 'labels?seconds=' + encodeURIComponent(seconds);
    renderSummary(document.getElementById('cpu'), await fetchSummary(url),
                  'samples');
    status.textContent = 'done ' + new Date().toLocaleTimeString();
  } catch (err) {
    status.textContent = String(err.message);
    status.classList.add('error');
  } finally {
    button.disabled = false;
  }
}

// Per key and value, the wall time of a wall profile's samples (its JSON
// form), as renderCompare takes it: {total, labels: {key: {value: ns}}}.
function wallByLabel(json) {
  const type = json.sample_types.findIndex(t => t.type === 'wall');
  const out = {total: 0, labels: {}};
  for (const s of json.samples) {
    const ns = s.values[type];
    out.total += ns;
    for (const [k, v] of Object.entries(s.labels || {})) {
      const values = out.labels[k] || (out.labels[k] = {});
      values[v] = (values[v] || 0) + ns;
    }
  }
  return out;
}

// One table per label key the CPU profile has: each value's share of CPU
// beside its share of wall time over the same window.
function renderCompare(target, cpu, wall, seconds) {
  const keys = Object.keys(cpu.labels).sort();
  const parts = [el('p', {class: 'note'},
    `over ${seconds} s: ${cpu.total} CPU samples, ` +
    `${(wall.total / 1e9).toFixed(1)} s of threads' wall time` +
    (keys.length ? '' : '; no CPU sample carries labels'))];
  for (const key of keys) {
    const inCpu = cpu.labels[key], inWall = wall.labels[key] || {};
    const names = [...new Set([...Object.keys(inCpu), ...Object.keys(inWall)])]
      .sort((a, b) => ((inWall[b] || 0) - (inWall[a] || 0)) || a.localeCompare(b));
    const body = el('tbody');
    for (const v of names) {
      const cpuShare = inCpu[v] ? inCpu[v].share : 0;
      const wallShare = wall.total ? (inWall[v] || 0) / wall.total : 0;
      body.append(el('tr', {'data-key': key, 'data-value': v},
        el('td', {class: 'value'}, v),
        el('td', {class: 'num', 'data-share': cpuShare.toFixed(4)}, percent(cpuShare)),
        el('td', {class: 'num', 'data-share': wallShare.toFixed(4)}, percent(wallShare))));
    }
    parts.push(el('table', {class: 'labelkey compare', 'data-key': key},
      el('caption', {}, key),
      el('thead', {}, el('tr', {},
        el('th', {}, 'value'), el('th', {class: 'num'}, 'CPU'),
        el('th', {class: 'num'}, 'wall'))),
      body));
  }
  target.replaceChildren(...parts);
}

// A CPU and a wall profile over one window (they may run together).
async function compareCpuWall() {
  const seconds = document.getElementById('cpu-seconds').value;
  const buttons = [document.getElementById('cpu-start'),
                   document.getElementById('compare-start')];
  const status = document.getElementById('cpu-status');
  buttons.forEach(b => { b.disabled = true; });
  status.classList.remove('error');
  status.textContent = `profiling CPU and wall for ${seconds} s…`;
  try {
    const q = encodeURIComponent(seconds);
    const [cpu, wall] = await Promise.all([
      fetchSummary('labels?seconds=' + q),
      fetchSummary('wall?seconds=' + q + '&format=json')]);
    renderCompare(document.getElementById('cpu'), cpu, wallByLabel(wall), seconds);
    status.textContent = 'done ' + new Date().toLocaleTimeString();
  } catch (err) {
    status.textContent = String(err.message);
    status.classList.add('error');
  } finally {
    buttons.forEach(b => { b.disabled = false; });
  }
}

// index.html#cpu=N fills in the form's seconds, nothing more: a window is
// started only by a press of its button.  Any site can open this page with
// a fragment (a link, a popup, a frame the user never sees, where a
// browser ignores the server's refusal to be framed), and the page's own
// request is same-origin, which the server's cross-site guard lets by.
function preselectFromHash() {
  const m = /^#cpu=(\d+)$/.exec(location.hash);
  if (m) document.getElementById('cpu-seconds').value = m[1];
}

document.getElementById('cpu-form').addEventListener('submit', profileCpu);
document.getElementById('compare-start').addEventListener('click', compareCpuWall);
refreshCensus();
preselectFromHash();
