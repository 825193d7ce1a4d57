// proclab panel: reads data/panel.json, fetches array chunks and strips on demand, draws with plotly.
// Layout of the data: src/proclab/panel/panel.schema.json. No build step, no network beyond this folder.
"use strict";

const $ = (id) => document.getElementById(id);
const S = {
  doc: null, sample: 0, step: 0, timer: null, matches: [], chunks: new Map(), images: new Map(),
  filter: { range: null, behaviour: "", extrema: null },
};

function fetchJSON(path) {
  return fetch(path).then((r) => { if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`); return r.json(); });
}

// One chunk of a chunked float32 array, fetched once and kept.
function chunk(name, c) {
  const key = `${name}/${c}`;
  if (!S.chunks.has(key)) {
    const file = S.doc.arrays[name].files[c];
    S.chunks.set(key, fetch(`data/${file}`).then((r) => {
      if (!r.ok) throw new Error(`${file}: HTTP ${r.status}`);
      return r.arrayBuffer();
    }).then((b) => new Float32Array(b)));
  }
  return S.chunks.get(key);
}

// (steps x components) rows of one sample, as an array of Float32Array views.
async function rows(name, i) {
  const spec = S.doc.arrays[name];
  const [, T, C] = spec.shape;
  const c = Math.floor(i / spec.chunk);
  const data = await chunk(name, c);
  const base = (i - c * spec.chunk) * T * C;
  return Array.from({ length: T }, (_, t) => data.subarray(base + t * C, base + (t + 1) * C));
}

async function wholeArray(name) {
  const spec = S.doc.arrays[name];
  const parts = await Promise.all(spec.files.map((_, c) => chunk(name, c)));
  return { parts, spec };
}

function image(path) {
  if (!S.images.has(path)) {
    S.images.set(path, new Promise((resolve, reject) => {
      const img = new Image();
      img.onload = () => resolve(img);
      img.onerror = () => reject(new Error(`cannot load ${path}`));
      img.src = `data/${path}`;
    }));
  }
  return S.images.get(path);
}

function options(select, items, selected) {
  select.replaceChildren(...items.map(([value, label]) => {
    const o = document.createElement("option");
    o.value = value; o.textContent = label; o.selected = String(value) === String(selected);
    return o;
  }));
}

function parseSteps(text, T) {
  const t = text.trim();
  if (!t) return Array.from({ length: T }, (_, i) => i);
  const out = new Set();
  for (const part of t.split(",")) {
    const m = part.trim().match(/^(\d+)(?:-(\d+))?$/);
    if (!m) throw new Error(`steps "${part}": give N, N-M or a comma list`);
    const lo = +m[1], hi = m[2] === undefined ? lo : +m[2];
    for (let s = lo; s <= hi; s++) { if (s >= T) throw new Error(`step ${s} is past the last step ${T - 1}`); out.add(s); }
  }
  return [...out].sort((a, b) => a - b);
}

// ---------------------------------------------------------------- filters
async function computeMatches() {
  const d = S.doc, N = d.samples.length, f = S.filter;
  let keep = new Uint8Array(N).fill(1);
  if (f.behaviour !== "") {
    const members = new Set(d.behaviours.find((b) => String(b.id) === f.behaviour).members);
    for (let i = 0; i < N; i++) if (!members.has(i)) keep[i] = 0;
  }
  if (f.extrema) {
    const list = new Set(d.extrema[f.extrema.scope][f.extrema.ic][f.extrema.kind]);
    for (let i = 0; i < N; i++) if (!list.has(i)) keep[i] = 0;
  }
  if (f.range) {
    const { parts, spec } = await wholeArray(f.range.field);
    const [, T, C] = spec.shape;
    for (let i = 0; i < N; i++) {
      if (!keep[i]) continue;
      const c = Math.floor(i / spec.chunk), data = parts[c], base = (i - c * spec.chunk) * T * C;
      for (const s of f.range.steps) {
        const v = data[base + s * C + f.range.index];
        if (!(v >= f.range.lo && v <= f.range.hi)) { keep[i] = 0; break; }  // NaN never matches
      }
    }
  }
  S.matches = [];
  for (let i = 0; i < N; i++) if (keep[i]) S.matches.push(i);
  $("match-count").textContent = String(S.matches.length);
  const desc = [];
  if (f.range) desc.push(`${f.range.field}[${f.range.index}] in [${f.range.lo}, ${f.range.hi}] at steps ${f.range.steps.join(",")}`);
  if (f.behaviour !== "") desc.push(`behaviour ${f.behaviour}`);
  if (f.extrema) desc.push(`${f.extrema.kind} of IC ${f.extrema.ic} (${f.extrema.scope.replace("_", " ")})`);
  $("filter-desc").textContent = desc.length ? `(${desc.join("; ")})` : "(no filter)";
  return fillSampleList();
}

function fillSampleList() {
  const d = S.doc;
  const shown = S.matches;
  options($("sample"), shown.map((i) => [i, `${d.samples[i].kind === "real" ? "real: " : ""}${d.samples[i].name}`]), S.sample);
  // The sample on screen stays while it matches; otherwise the first match is shown.
  return shown.length && !S.matches.includes(S.sample) ? selectSample(shown[0]) : Promise.resolve();
}

function drawHistogram() {
  const field = $("filter-field").value, k = +$("filter-index").value;
  if (field !== "ics" || !S.doc.histograms[k]) { Plotly.purge("hist"); $("hist").hidden = true; return; }
  $("hist").hidden = false;
  const h = S.doc.histograms[k];
  const mids = h.counts.map((_, j) => (h.edges[j] + h.edges[j + 1]) / 2);
  Plotly.react("hist", [{ type: "bar", x: mids, y: h.counts, marker: { color: "#888" } }],
    { title: { text: `IC ${k} loadings, all samples and steps`, font: { size: 12 } }, margin: { t: 30, r: 10, b: 30, l: 40 }, bargap: 0 },
    { displayModeBar: false, responsive: true });
}

// ---------------------------------------------------------------- sample view
function selectSample(i) {
  S.sample = i;
  $("sample").value = String(i);
  const s = S.doc.samples[i];
  $("step").max = String(s.actions.length - 1);
  S.step = Math.min(S.step, s.actions.length - 1);
  return render();
}

async function drawFrames() {
  const s = S.doc.samples[S.sample], fs = S.doc.meta.frame_size, t = S.step;
  const target = $("saliency").value;
  const [obs, sal] = await Promise.all([image(s.strips.obs), s.strips[target] ? image(s.strips[target]) : null]);
  for (const id of ["frame", "saliency-canvas"]) {
    const ctx = $(id).getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.globalAlpha = 1;
    ctx.drawImage(obs, t * fs, 0, fs, fs, 0, 0, 256, 256);
  }
  drawTruth(s, t);
  const ctx = $("saliency-canvas").getContext("2d");
  if (sal) {
    ctx.globalAlpha = +$("blend").value / 100;
    ctx.drawImage(sal, t * fs, 0, fs, fs, 0, 0, 256, 256);
    ctx.globalAlpha = 1;
  } else {
    ctx.fillStyle = "rgba(0,0,0,0.6)"; ctx.fillRect(0, 0, 256, 256);
    ctx.fillStyle = "#fff"; ctx.font = "14px sans-serif"; ctx.fillText(`no ${target} map for this sample`, 12, 128);
  }
}

// Ground-truth markers of a recorded episode over its frame: the agent (ring), the goal (square) and the
// nearest thing of each kind (dot), each labelled; pixel coordinates of the 64x64 frame, null = absent.
function drawTruth(s, t) {
  const truth = s.truth, shown = Boolean(truth) && $("truth").checked;
  $("frame").dataset.truthMarkers = "0";
  if (!shown) return;
  const ctx = $("frame").getContext("2d"), scale = 256 / S.doc.meta.frame_size;
  let drawn = 0;
  ctx.font = "10px sans-serif";
  truth.names.forEach((name, m) => {
    const x = truth.x[t][m], y = truth.y[t][m];
    if (x === null || y === null || x < 0 || y < 0 || x >= S.doc.meta.frame_size || y >= S.doc.meta.frame_size) return;
    const px = x * scale, py = y * scale;
    ctx.lineWidth = 2;
    ctx.strokeStyle = name === "agent" ? "#ff0" : name === "goal" ? "#f80" : "#0ff";
    ctx.fillStyle = ctx.strokeStyle;
    ctx.beginPath();
    if (name === "agent") ctx.arc(px, py, 9, 0, 2 * Math.PI);
    else if (name === "goal") ctx.rect(px - 7, py - 7, 14, 14);
    else ctx.arc(px, py, 3, 0, 2 * Math.PI);
    name === "agent" || name === "goal" ? ctx.stroke() : ctx.fill();
    ctx.fillText(name, px + 6, py - 6);
    drawn += 1;
  });
  $("frame").dataset.truthMarkers = String(drawn);
}

function axis(value) { const [kind, k] = value.split(":"); return { kind, k: +k }; }

async function drawScatter() {
  const d = S.doc, x = axis($("x-axis").value), y = axis($("y-axis").value);
  const bg = d.background;
  const usesPcs = d.arrays.pcs && (x.kind === "pcs" || y.kind === "pcs");
  const [ics, pcs] = await Promise.all([rows("ics", S.sample), usesPcs ? rows("pcs", S.sample) : null]);
  const traj = { ics, pcs };
  const tx = traj[x.kind] ? traj[x.kind].map((r) => r[x.k]) : [], ty = traj[y.kind] ? traj[y.kind].map((r) => r[y.k]) : [];
  const label = (a) => `${a.kind === "ics" ? "IC" : "PC"} ${a.k}`;
  Plotly.react("scatter", [
    { type: "scatter", mode: "markers", name: "real states", hoverinfo: "skip",
      x: bg[x.kind].map((r) => r[x.k]), y: bg[y.kind].map((r) => r[y.k]), marker: { size: 3, color: "rgba(120,120,120,0.35)" } },
    { type: "scatter", mode: "lines+markers", name: "this sample", x: tx, y: ty,
      text: tx.map((_, t) => `step ${t}`), marker: { size: 6, color: "#1f77b4" }, line: { color: "#1f77b4" } },
    { type: "scatter", mode: "markers", name: `step ${S.step}`, x: [tx[S.step]], y: [ty[S.step]],
      marker: { size: 14, color: "#d62728", line: { color: "#000", width: 1 } } },
  ], { margin: { t: 10, r: 10, b: 40, l: 50 }, xaxis: { title: { text: label(x) } }, yaxis: { title: { text: label(y) } },
       legend: { orientation: "h", y: -0.2 }, showlegend: true }, { displayModeBar: false, responsive: true });
}

async function drawBars() {
  const d = S.doc, k = d.meta.n_ics;
  const target = $("bar-target").value, name = `grad:${target}`;
  const [icRows, gradRows] = await Promise.all([rows("ics", S.sample), d.arrays[name] ? rows(name, S.sample) : null]);
  const ics = icRows[S.step];
  let colour = new Array(k).fill(0), has = false;
  if (gradRows) {
    const g = gradRows[S.step];
    has = Array.from(g).some(Number.isFinite);
    colour = Array.from(g, (v) => (Number.isFinite(v) ? v : 0));
  }
  const lim = Math.max(1e-9, ...colour.map(Math.abs));
  Plotly.react("bars", [{
    type: "bar", x: Array.from({ length: k }, (_, i) => `IC ${i}`), y: Array.from(ics),
    marker: has ? { color: colour, colorscale: "RdBu", reversescale: true, cmin: -lim, cmax: lim, showscale: true,
                    colorbar: { title: { text: "grad" }, thickness: 10 } } : { color: "#bbb" },
  }], { margin: { t: 10, r: 10, b: 40, l: 50 }, yaxis: { title: { text: "loading" } } }, { displayModeBar: false, responsive: true });
}

async function render() {
  const s = S.doc.samples[S.sample];
  $("step").value = String(S.step);
  $("step-label").textContent = `step ${S.step} / ${s.actions.length - 1}`;
  document.body.dataset.step = String(S.step);
  document.body.dataset.sample = String(S.sample);
  const act = S.doc.meta.actions[s.actions[S.step]] ?? s.actions[S.step];
  $("sample-info").textContent = `${s.kind} · behaviour ${s.behaviour ?? "-"} · action ${act} · value ${s.values[S.step].toFixed(3)} · reward ${s.rewards[S.step]}`;
  await Promise.all([drawFrames(), drawScatter(), drawBars()]);
}

function setStep(t) {
  const T = S.doc.samples[S.sample].actions.length;
  S.step = ((t % T) + T) % T;
  return render();
}

function togglePlay() {
  if (S.timer) { clearInterval(S.timer); S.timer = null; $("play").textContent = "play"; }
  else { S.timer = setInterval(() => setStep(S.step + 1).catch(fail), 400); $("play").textContent = "pause"; }
  document.body.dataset.playing = S.timer ? "1" : "0";
}

// ---------------------------------------------------------------- context
function drawContext() {
  const d = S.doc;
  if (d.training) {
    Plotly.newPlot("curve", [{ type: "scatter", mode: "lines", x: d.training.steps, y: d.training.values, line: { color: "#2ca02c" } }],
      { title: { text: `learning curve: ${d.training.metric}`, font: { size: 12 } }, margin: { t: 30, r: 10, b: 40, l: 50 }, xaxis: { title: { text: "environment steps" } } },
      { displayModeBar: false, responsive: true });
  } else { $("curve").hidden = true; }
  const table = $("eval-table");
  if (d.eval.length) {
    const cols = [...new Set(d.eval.flatMap((r) => Object.keys(r)))];
    const head = document.createElement("tr");
    head.append(...cols.map((c) => Object.assign(document.createElement("th"), { textContent: c })));
    table.append(head);
    for (const r of d.eval) {
      const tr = document.createElement("tr");
      tr.append(...cols.map((c) => Object.assign(document.createElement("td"), {
        textContent: typeof r[c] === "number" ? (+r[c].toFixed(3)).toString() : (r[c] ?? "") })));
      table.append(tr);
    }
  }
  if (!d.training && !d.eval.length && !d.interventions.length) {
    $("context").append(Object.assign(document.createElement("p"), { className: "muted",
      textContent: "no training run (metrics.csv beside the agent's checkpoint), eval results or interventions found" }));
  }
  const box = $("interventions");
  for (const iv of d.interventions) {
    const div = document.createElement("div");
    div.append(Object.assign(document.createElement("h3"), { textContent: `intervention: ${iv.name}` }));
    div.append(Object.assign(document.createElement("pre"), { textContent: JSON.stringify(iv.summary, null, 1) }));
    if (iv.video) div.append(Object.assign(document.createElement("video"), { src: `data/${iv.video}`, controls: true, muted: true }));
    box.append(div);
  }
}

function fail(err) {
  console.error(err);
  $("error").hidden = false;
  $("error").textContent = String(err.message || err);
}


// ---------------------------------------------------------------- direction atlas
function el(tag, props = {}, ...children) {
  const { dataset, ...rest } = props;
  const e = Object.assign(document.createElement(tag), rest);
  for (const [k, v] of Object.entries(dataset || {})) e.dataset[k] = String(v);
  e.append(...children.filter((c) => c !== null && c !== undefined));
  return e;
}

const fmt = (v, d = 2) => (v === null || v === undefined ? "–" : (v >= 0 ? "+" : "") + v.toFixed(d));
const ARM_NAMES = { collapse: "increment-collapse", mean: "mean-ablation", resample: "resample-ablation",
                    p05: "amplify low (p05)", p95: "amplify high (p95)", on: "held on" };
const METRICS = [["level_complete", "Δ completion"], ["return", "Δ return"], ["length", "Δ length"], ["tv_distance", "action TV"]];

function cell(m) {
  const [v, lo, hi, sig] = m;
  return `${fmt(v, 3)} [${fmt(lo, 3)}, ${fmt(hi, 3)}]${sig ? "*" : ""}`;
}

function progressBars(p) {
  const top = Math.max(1, ...p.active.map((a, i) => a / Math.max(1, p.all[i])));
  const box = el("div", { className: "hist", title: "share of steps active per tenth of the episode" });
  p.active.forEach((a, i) => {
    const share = a / Math.max(1, p.all[i]);
    box.append(el("span", { style: `height:${Math.round(28 * share / top) + 1}px`, title: `${(100 * share).toFixed(1)} %` }));
  });
  return box;
}

// r at every lag as a small line (lag 0 marked; above the grey line: positive correlation).
function lagLine(r, lags) {
  const ns = "http://www.w3.org/2000/svg", w = 86, h = 18;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", w); svg.setAttribute("height", h);
  const x = (i) => 1 + (i * (w - 2)) / Math.max(1, lags.length - 1), y = (v) => h / 2 - (v * (h - 2)) / 2;
  const line = (attrs) => { const e = document.createElementNS(ns, "line"); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); svg.append(e); };
  line({ x1: 0, x2: w, y1: h / 2, y2: h / 2, stroke: "#ccc" });
  const zero = lags.indexOf(0);
  line({ x1: x(zero), x2: x(zero), y1: 0, y2: h, stroke: "#ddd" });
  const path = document.createElementNS(ns, "polyline");
  path.setAttribute("points", r.map((v, i) => (v === null ? null : `${x(i)},${y(v)}`)).filter(Boolean).join(" "));
  path.setAttribute("fill", "none"); path.setAttribute("stroke", "#1f77b4");
  svg.append(path);
  const title = document.createElementNS(ns, "title");
  title.textContent = `r at lags ${lags[0]}..${lags[lags.length - 1]} (positive: the direction leads)`;
  svg.append(title);
  return svg;
}

function tracksTable(card) {
  const t = el("table", { className: "tracks" });
  t.append(el("tr", {}, el("th", { textContent: "tracks" }), el("th", { textContent: "r at lag 0 [95 % CI]" }),
    el("th", { textContent: `r at lags ${S.atlas.lags[0]}..${S.atlas.lags[S.atlas.lags.length - 1]}` }), el("th", { textContent: "peak lag (r)" })));
  for (const r of card.tracks) {
    const lead = r.peak.claimed ? `${r.peak.lag > 0 ? "leads" : "follows"} by ${Math.abs(r.peak.lag)} (${fmt(r.peak.r)})` : `${r.peak.lag} (${fmt(r.peak.r)}), not established`;
    t.append(el("tr", {}, el("td", { textContent: r.quantity + (r.tracked ? " ✓" : "") }),
      el("td", { textContent: `${fmt(r.r0)} [${fmt(r.ci0[0])}, ${fmt(r.ci0[1])}]` }), el("td", {}, lagLine(r.r, S.atlas.lags)),
      el("td", { textContent: lead })));
  }
  return t;
}

function causesTable(card) {
  const c = card.causes;
  if (!c.swept) return el("p", { className: "muted", textContent: `what it causes: ${c.note}` });
  const t = el("table", { className: "causes" });
  t.append(el("tr", {}, el("th", { textContent: "edit (sweep)" }), el("th", { textContent: "held at (percentile)" }),
    ...METRICS.map(([, h]) => el("th", { textContent: h })), el("th")));
  for (const a of c.arms) {
    t.append(el("tr", { className: a.off_data ? "off-data" : "" },
      el("td", { textContent: ARM_NAMES[a.arm] || a.arm }),
      el("td", { textContent: `${a.held} (${a.percentile})${a.off_data ? " off the data: not its role" : ""}` }),
      ...METRICS.map(([k]) => el("td", { textContent: cell(a.metrics[k]) })),
      el("td", {}, el("a", { href: "#", textContent: "sweep row", dataset: { row: a.row } }))));
  }
  return t;
}

function cardElement(card) {
  const badge = card.causes.significant ? el("span", { className: "badge", textContent: "causal" })
    : card.causes.significant_off_data_only ? el("span", { className: "badge off", textContent: "off-data effect only" }) : null;
  const act = card.activity;
  const moments = el("div", { className: "moments" });
  for (const m of card.moments) {
    const link = m.sample === null ? el("span", { className: "muted", textContent: "no window in the episode viewer" })
      : el("a", { href: "#", textContent: "open in the episode viewer", dataset: { sample: m.sample, step: m.sample_step } });
    moments.append(el("figure", {}, el("img", { src: `data/${m.strip}`, loading: "lazy", alt: `${m.side} moment` }),
      el("figcaption", {}, `${m.side}: episode ${m.episode} step ${m.step}, value ${m.value} · `, link)));
  }
  const saliency = card.saliency ? el("img", { className: "saliency", src: `data/${card.saliency}`, loading: "lazy",
    title: "mean SmoothGrad of the coordinate on its most active frames (blue raises it, red lowers it)" }) : null;
  return el("article", { className: "card", id: `card-${card.direction}`, dataset: { direction: card.direction } },
    el("h3", {}, card.label, badge),
    el("p", { className: "summary", textContent: card.summary }),
    el("div", { className: "top" }, saliency, el("div", {},
      el("div", { textContent: `active on ${(100 * act.active).toFixed(1)} % of steps (${act.rule}) · kurtosis ${act.kurtosis === null ? "–" : act.kurtosis.toFixed(2)}` }),
      progressBars(act.progress))),
    tracksTable(card), causesTable(card), moments);
}

function sweepTable(atlas) {
  const t = $("sweep-table");
  t.replaceChildren(el("tr", {}, ...["direction", "edit", "held at (percentile)", ...METRICS.map(([, h]) => h)].map((h) => el("th", { textContent: h }))));
  for (const r of atlas.sweep_rows) {
    t.append(el("tr", { id: r.id, className: r.off_data ? "off-data" : "" },
      el("td", {}, el("a", { href: "#", textContent: r.label, dataset: { card: r.direction } })),
      el("td", { textContent: ARM_NAMES[r.arm] || r.arm }),
      el("td", { textContent: `${r.held} (${r.percentile})${r.off_data ? " off" : ""}` }),
      ...METRICS.map(([k]) => el("td", { textContent: cell(r.metrics[k]) }))));
  }
  $("sweep-note").textContent = atlas.sweep_rows.length ? "changes against the baseline on paired levels; intervals corrected over the swept directions; * significant; off: held outside the recorded 0.5-99.5 % range" : atlas.sweep_note;
}

// Cards in the chosen order (descending; unmeasured last; ties by direction), those matching the filter shown.
function arrangeCards() {
  const atlas = S.atlas, key = $("atlas-sort").value, query = $("atlas-filter").value.trim().toLowerCase();
  const value = (c) => c.keys[key];
  const order = atlas.cards.slice().sort((a, b) => {
    const va = value(a), vb = value(b);
    if (va === null && vb === null) return a.direction - b.direction;
    if (va === null) return 1;
    if (vb === null) return -1;
    return vb - va || a.direction - b.direction;
  });
  const shown = [];
  const box = $("cards");
  for (const c of order) {
    const node = S.cardNodes.get(c.direction);
    node.hidden = query !== "" && !c.text.includes(query);
    if (!node.hidden) shown.push(c.direction);
    box.append(node);
  }
  $("atlas-count").textContent = String(shown.length);
  document.body.dataset.atlasOrder = shown.join(",");
}

function renderAtlas(i) {
  const atlas = (S.atlas = S.doc.atlases[i]);
  options($("atlas-sort"), atlas.sorts, atlas.sorts[0][0]);
  S.cardNodes = new Map(atlas.cards.map((c) => [c.direction, cardElement(c)]));
  $("cards").replaceChildren();
  const n = atlas.counts;
  $("atlas-meta").textContent = `${atlas.k} ${atlas.label} directions (${atlas.basis}), ${atlas.episodes} episodes, ${atlas.steps} steps; ` +
    `explains ${(100 * atlas.variance_explained).toFixed(1)} % of the z-scored state variance; ` +
    `${n.significant} of ${n.swept} swept directions have a significant on-data effect after correction` +
    (n.significant_off_data_only ? `, ${n.significant_off_data_only} only off the data` : "");
  $("atlas-prediction").replaceChildren(...atlas.prediction.map((p) => el("li", { textContent: `predicted against measured: ${p}` })));
  sweepTable(atlas);
  arrangeCards();
}

function showView(name) {
  $("atlas-view").hidden = name !== "atlas";
  $("episodes-view").hidden = name !== "episodes";
  for (const b of document.querySelectorAll("nav#tabs button")) b.classList.toggle("active", b.dataset.view === name);
  document.body.dataset.view = name;
  if (name === "episodes") for (const id of ["scatter", "bars", "hist", "curve"]) if ($(id).data) Plotly.Plots.resize(id);
}

async function openMoment(sample, step) {
  showView("episodes");
  S.filter = { range: null, behaviour: "", extrema: null };
  $("behaviour").value = ""; $("extrema-ic").value = "";
  await computeMatches();
  S.step = step;
  await selectSample(sample);
}

function gotoRow(id) {
  for (const r of document.querySelectorAll("#sweep-table tr.highlight")) r.classList.remove("highlight");
  const row = $(id);
  row.classList.add("highlight");
  row.scrollIntoView({ block: "center" });
  document.body.dataset.highlightRow = id;
}

function startAtlas() {
  const atlases = S.doc.atlases || [];
  if (!atlases.length) return false;
  $("tabs").hidden = false;
  options($("atlas-basis"), atlases.map((a, i) => [i, `${a.basis} (${a.k} ${a.label}s)`]), 0);
  $("atlas-basis").addEventListener("change", () => renderAtlas(+$("atlas-basis").value));
  $("atlas-sort").addEventListener("change", arrangeCards);
  $("atlas-filter").addEventListener("input", arrangeCards);
  for (const b of document.querySelectorAll("nav#tabs button")) b.addEventListener("click", () => showView(b.dataset.view));
  $("cards").addEventListener("click", (e) => {
    const a = e.target.closest("a");
    if (!a) return;
    e.preventDefault();
    if (a.dataset.sample !== undefined) openMoment(+a.dataset.sample, +a.dataset.step).catch(fail);
    if (a.dataset.row !== undefined) gotoRow(a.dataset.row);
  });
  $("sweep-table").addEventListener("click", (e) => {
    const a = e.target.closest("a[data-card]");
    if (!a) return;
    e.preventDefault();
    $("atlas-filter").value = "";
    arrangeCards();
    $(`card-${a.dataset.card}`).scrollIntoView({ block: "start" });
  });
  renderAtlas(0);
  showView("atlas");
  return true;
}

// ---------------------------------------------------------------- start
async function main() {
  const d = (S.doc = await fetchJSON("data/panel.json"));
  const m = d.meta;
  if (startAtlas()) document.body.dataset.atlasReadyMs = String(Math.round(performance.now()));  // the front page
  $("title").textContent = m.title;
  const nReal = d.samples.filter((s) => s.kind === "real").length;
  $("meta").textContent = `${d.samples.length - nReal} simulated samples, ${nReal} real episodes, ${m.n_ics} ICs · ${m.source}`;
  const axes = [...Array.from({ length: m.n_ics }, (_, i) => [`ics:${i}`, `IC ${i}`]),
                ...Array.from({ length: d.arrays.pcs ? d.arrays.pcs.shape[2] : 0 }, (_, i) => [`pcs:${i}`, `PC ${i}`])];
  options($("x-axis"), axes, "ics:0");
  options($("y-axis"), axes, m.n_ics > 1 ? "ics:1" : "ics:0");
  const maps = [...new Set(d.samples.flatMap((s) => Object.keys(s.strips)).filter((k) => k !== "obs"))];
  options($("saliency"), maps.map((k) => [k, k]), maps.includes("action") ? "action" : maps[0]);
  const gradTargets = Object.keys(d.arrays).filter((a) => a.startsWith("grad:")).map((a) => a.slice(5));
  options($("bar-target"), gradTargets.length ? gradTargets.map((t) => [t, t]) : [["", "none (no saliency run with IC gradients)"]],
          gradTargets.includes("value") ? "value" : gradTargets[0]);
  options($("filter-field"), [["ics", "IC loading"], ...gradTargets.map((t) => [`grad:${t}`, `gradient loading of ${t}`])], "ics");
  options($("filter-index"), Array.from({ length: m.n_ics }, (_, i) => [i, `IC ${i}`]), 0);
  $("filter-steps").placeholder = `0-${m.steps - 1} (all)`;
  for (const b of d.behaviours) {
    $("behaviour").append(Object.assign(document.createElement("option"), { value: String(b.id), textContent: `${b.name} (${b.members.length})` }));
  }
  for (let i = 0; i < m.n_ics; i++) $("extrema-ic").append(Object.assign(document.createElement("option"), { value: String(i), textContent: `IC ${i}` }));

  $("sample").addEventListener("change", () => selectSample(+$("sample").value).catch(fail));
  $("step").addEventListener("input", () => setStep(+$("step").value).catch(fail));
  $("prev").addEventListener("click", () => setStep(S.step - 1).catch(fail));
  $("next").addEventListener("click", () => setStep(S.step + 1).catch(fail));
  $("play").addEventListener("click", togglePlay);
  for (const id of ["saliency", "blend", "truth"]) $(id).addEventListener("input", () => drawFrames().catch(fail));
  for (const id of ["x-axis", "y-axis"]) $(id).addEventListener("change", () => drawScatter().catch(fail));
  $("bar-target").addEventListener("change", () => drawBars().catch(fail));
  $("behaviour").addEventListener("change", () => { S.filter.behaviour = $("behaviour").value; computeMatches().catch(fail); });
  $("filter-index").addEventListener("change", drawHistogram);
  $("filter-field").addEventListener("change", drawHistogram);
  $("filter-apply").addEventListener("click", () => {
    try {
      const lo = parseFloat($("filter-lo").value), hi = parseFloat($("filter-hi").value);
      if (!(lo <= hi)) throw new Error("range: 'from' must be a number not above 'to'");
      S.filter.range = { field: $("filter-field").value, index: +$("filter-index").value, lo, hi,
                         steps: parseSteps($("filter-steps").value, m.steps) };
      $("error").hidden = true;
    } catch (err) { fail(err); return; }
    computeMatches().catch(fail);
  });
  const extremaChanged = () => {
    const ic = $("extrema-ic").value;
    S.filter.extrema = ic === "" ? null : { ic: +ic, kind: $("extrema-kind").value, scope: $("extrema-scope").value };
    computeMatches().catch(fail);
  };
  for (const id of ["extrema-ic", "extrema-kind", "extrema-scope"]) $(id).addEventListener("change", extremaChanged);
  $("filter-clear").addEventListener("click", () => {
    S.filter = { range: null, behaviour: "", extrema: null };
    $("behaviour").value = ""; $("extrema-ic").value = "";
    computeMatches().catch(fail);
  });
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT") return;
    if (e.key === "ArrowRight") setStep(S.step + 1).catch(fail);
    if (e.key === "ArrowLeft") setStep(S.step - 1).catch(fail);
    if (e.key === " ") { e.preventDefault(); togglePlay(); }
  });

  await computeMatches();
  await selectSample(S.sample);
  drawHistogram();
  drawContext();
  document.body.dataset.readyMs = String(Math.round(performance.now()));  // since navigation started
  document.body.dataset.ready = "1";
}

main().catch(fail);
