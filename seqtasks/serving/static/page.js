"use strict";
// The page of `seqtasks serve`: forms for the tasks served, their answers drawn with the
// attention behind them. Everything here talks to this server only (same origin).
const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, text) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
};
const SVG = "http://www.w3.org/2000/svg"; // SVG's namespace: a name, never fetched
const svg = (tag, attrs = {}, text) => {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
};
const fmt = (x) => (x === null || x === undefined ? "n/a" : Number(x).toFixed(3));

// ---- talking to the server -------------------------------------------------------------------
function explain(status, body) {
  // The server's `detail`: a message, or a list of problems each with where and what.
  let detail = body && body.detail !== undefined ? body.detail : body;
  if (Array.isArray(detail)) {
    detail = detail.map((p) => (p.loc ? p.loc.join(".") + ": " : "") + (p.msg || JSON.stringify(p))).join("\n");
  } else if (typeof detail !== "string") {
    detail = JSON.stringify(detail);
  }
  return `The server answered ${status}: ${detail}`;
}

const withKey = (init = {}) => {
  const key = $("api-key").value;
  return key ? { ...init, headers: { ...init.headers, "X-API-Key": key } } : init;
};

async function ask(path, init, errorBox, resultBox, button) {
  errorBox.hidden = true;
  button.disabled = true;
  try {
    const response = await fetch(path, withKey(init));
    const text = await response.text();
    let body;
    try { body = JSON.parse(text); } catch { body = text; }
    if (!response.ok) throw new Error(explain(response.status, body));
    return body;
  } catch (error) {
    errorBox.textContent = error.message.startsWith("The server") ? error.message : `The request failed: ${error.message}`;
    errorBox.hidden = false;
    resultBox.hidden = true;
    return null;
  } finally {
    button.disabled = false;
  }
}

// The search settings the user changed; the rest are left to the model (its own, which the
// placeholders show), so that the page never overrides a checkpoint's settings unasked.
const settings = (prefix) => {
  const chosen = {};
  for (const [name, id] of [["beam", "-beam"], ["n_best", "-nbest"]]) {
    const value = $(prefix + id).value;
    if (value !== "") chosen[name] = Number(value);
  }
  return chosen;
};

function nbest(list, alternatives, key) {
  list.replaceChildren();
  for (const a of alternatives || []) list.append(el("li", {}, `${a[key]} (score ${fmt(a.score)})`));
  list.hidden = !(alternatives && alternatives.length);
}

// ---- translation: a heat map of target pieces × source pieces ---------------------------------
// sentencepiece's word-start mark, shown as a visible space
const shown = (piece) => piece.replaceAll("\u2581", "\u2423");

const CELL = 16; // px: a heat map cell, and the width (or height) of the piece naming it

function heatmap(map, rows, columns, weights) {
  // The weights as one canvas, a cell each, between the pieces that name its rows (targets)
  // and columns (sources), each a focusable button. Lighting a row or a column colours the
  // other axis's pieces by their weights and moves two veils over the other cells; the canvas
  // is drawn once, so the largest map an answer may hold stays quick to hover
  // (docs/serving.md, "The page").
  map.replaceChildren();
  map.style.setProperty("--cell", `${CELL}px`);
  map.append(el("div", { class: "corner" }));
  const head = map.appendChild(el("div", { class: "cols", role: "group", "aria-label": "source pieces" }));
  const side = map.appendChild(el("div", { class: "rows", role: "group", "aria-label": "target pieces" }));
  const cells = map.appendChild(el("div", { class: "cells" }));
  const canvas = cells.appendChild(el("canvas", {
    width: columns.length * CELL, height: rows.length * CELL, role: "img",
    "aria-label": `attention weights of ${rows.length} target pieces over ${columns.length} source pieces`,
  }));
  const context = canvas.getContext("2d");
  weights.forEach((row, i) => row.forEach((w, j) => {
    context.fillStyle = `rgba(26, 95, 180, ${w})`;
    context.fillRect(j * CELL, i * CELL, CELL, CELL);
  }));
  const piece = (text, attrs) => el("button", { type: "button", ...attrs }, shown(text));
  const sources = columns.map((p, j) => head.appendChild(piece(p, { class: "src", "data-col": j })));
  const targets = rows.map((p, i) => side.appendChild(piece(p, { class: "tgt", "data-row": i })));
  const veils = [0, 1].map(() => cells.appendChild(el("div", { class: "veil", "aria-hidden": "true", hidden: "" })));
  let lit = [];
  const clear = () => {
    lit.forEach((n) => { n.classList.remove("lit", "on"); n.style.removeProperty("--w"); });
    lit = [];
    veils.forEach((v) => { v.hidden = true; });
    delete map.dataset.row; delete map.dataset.col;
  };
  const veil = (v, left, top, width, height) => {
    Object.assign(v.style, { left: `${left}px`, top: `${top}px`, width: `${width}px`, height: `${height}px` });
    v.hidden = !(width > 0 && height > 0);
  };
  const light = (header, others, weightOf) => {
    clear();
    header.classList.add("on");
    others.forEach((n, k) => { n.classList.add("lit"); n.style.setProperty("--w", weightOf(k)); });
    lit = [header, ...others];
  };
  const [width, height] = [canvas.width, canvas.height];
  targets.forEach((button, i) => {
    const show = () => {
      light(button, sources, (j) => weights[i][j]);
      veil(veils[0], 0, 0, width, i * CELL);
      veil(veils[1], 0, (i + 1) * CELL, width, height - (i + 1) * CELL);
      map.dataset.row = i;
    };
    button.addEventListener("mouseenter", show); button.addEventListener("focus", show);
  });
  sources.forEach((button, j) => {
    const show = () => {
      light(button, targets, (i) => weights[i][j]);
      veil(veils[0], 0, 0, j * CELL, height);
      veil(veils[1], (j + 1) * CELL, 0, width - (j + 1) * CELL, height);
      map.dataset.col = j;
    };
    button.addEventListener("mouseenter", show); button.addEventListener("focus", show);
  });
  map.addEventListener("mouseleave", clear);
  const readout = $(map.id.replace("heatmap", "cell"));
  canvas.addEventListener("mousemove", (event) => {
    const i = Math.floor(event.offsetY / CELL), j = Math.floor(event.offsetX / CELL);
    if (readout && i >= 0 && i < rows.length && j >= 0 && j < columns.length) {
      readout.textContent = `${shown(rows[i])} → ${shown(columns[j])}: ${weights[i][j].toFixed(3)}`;
    }
  });
}

function translation() {
  const form = $("tr-form");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = JSON.stringify({ sentences: [$("tr-text").value], ...settings("tr"), attention: true });
    const answer = await ask("/translate", { method: "POST", headers: { "Content-Type": "application/json" }, body },
      $("tr-error"), $("tr-result"), form.querySelector("button"));
    if (!answer) return;
    const t = answer.translations[0];
    $("tr-output").textContent = t.text;
    $("tr-score").textContent = fmt(t.score);
    nbest($("tr-nbest-list"), t.alternatives, "text");
    heatmap($("tr-heatmap"), t.pieces, t.source_pieces, t.attention);
    $("tr-result").hidden = false;
  });
}

// ---- captioning: each word's attention laid over the photo -----------------------------------
function paint(canvas, weights, grid) {
  // One word's weights over the (H, W) grid, scaled so that its largest is white: the photo
  // shows through where the word looks (the browser smooths the grid as it scales it up).
  const [h, w] = grid;
  canvas.width = w; canvas.height = h;
  const context = canvas.getContext("2d");
  const top = Math.max(...weights) || 1;
  const image = context.createImageData(w, h);
  weights.forEach((a, k) => {
    const v = Math.round(255 * (0.15 + 0.85 * (a / top)));
    image.data.set([v, v, v, 255], 4 * k);
  });
  context.putImageData(image, 0, 0);
}

function captioning() {
  const form = $("cap-form"), file = $("cap-file"), drop = $("cap-drop");
  let chosen = null;
  const choose = (f) => { chosen = f || null; drop.textContent = chosen ? `Chosen: ${chosen.name}` : "Drop an image here, or press Enter to choose one"; };
  file.addEventListener("change", () => choose(file.files[0]));
  drop.addEventListener("click", () => file.click());
  drop.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); file.click(); } });
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); choose(e.dataTransfer.files[0]); });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!chosen) { $("cap-error").textContent = "Choose an image first."; $("cap-error").hidden = false; return; }
    const data = new FormData();
    data.append("image", chosen, chosen.name);
    for (const [name, value] of Object.entries(settings("cap"))) data.append(name, String(value));
    data.append("attention", "true");
    const answer = await ask("/caption", { method: "POST", body: data }, $("cap-error"), $("cap-result"), form.querySelector("button"));
    if (!answer) return;
    const url = URL.createObjectURL(chosen);
    $("cap-output").textContent = answer.caption;
    $("cap-score").textContent = fmt(answer.score);
    nbest($("cap-nbest-list"), answer.alternatives, "caption");
    $("cap-photo").src = url;
    const words = $("cap-words"), strip = $("cap-strip"), focus = $("cap-focus");
    words.replaceChildren(); strip.replaceChildren();
    const figures = [], buttons = [];
    const show = (k) => {
      paint(focus, answer.attention[k], answer.grid);
      figures.forEach((f, i) => f.classList.toggle("on", i === k));
      buttons.forEach((b, i) => { b.classList.toggle("on", i === k); b.setAttribute("aria-pressed", String(i === k)); });
    };
    answer.words.forEach((word, k) => {
      const button = el("button", { type: "button", "aria-pressed": "false" }, word);
      for (const kind of ["mouseenter", "focus", "click"]) button.addEventListener(kind, () => show(k));
      words.append(button); buttons.push(button);
      const figure = el("figure", { class: "cap-overlay" });
      const frame = figure.appendChild(el("div"));
      frame.append(el("img", { src: url, alt: "" }));
      const canvas = frame.appendChild(el("canvas", { class: "overlay", "aria-hidden": "true" }));
      paint(canvas, answer.attention[k], answer.grid);
      figure.append(el("figcaption", {}, word));
      figure.addEventListener("click", () => show(k));
      strip.append(figure); figures.push(figure);
    });
    if (answer.words.length) show(0);
    $("cap-result").hidden = false;
  });
}

// ---- parsing: the tree drawn as a tree -------------------------------------------------------
function readTree(nested) {
  // The server's tree as it parsed it, [label, child, …] with each word a string, as
  // {label, children}; a leaf is {label, leaf: true}. The bracket string is never split again
  // here: a word may hold what JavaScript takes for a space (U+FEFF).
  if (typeof nested === "string") return { label: nested, leaf: true, children: [] };
  const [label, ...children] = nested;
  return { label, children: children.map(readTree) };
}

function drawTree(target, tree) {
  const dx = 70, dy = 48, pad = 20;
  let leaves = 0, depth = 0;
  const place = (n, d) => {
    n.y = pad + d * dy; depth = Math.max(depth, d);
    if (!n.children.length) { n.x = pad + dx / 2 + leaves++ * dx; return; }
    n.children.forEach((c) => place(c, d + 1));
    n.x = (n.children[0].x + n.children[n.children.length - 1].x) / 2;
  };
  place(tree, 0);
  // Leaves (the words) on one line at the bottom, as trees are drawn in textbooks.
  const bottom = pad + depth * dy;
  const lower = (n) => { if (n.leaf) n.y = bottom; n.children.forEach(lower); };
  lower(tree);
  target.replaceChildren();
  target.setAttribute("width", Math.max(leaves, 1) * dx + 2 * pad);
  target.setAttribute("height", bottom + pad + 10);
  const draw = (n) => {
    for (const c of n.children) {
      target.append(svg("line", { x1: n.x, y1: n.y + 5, x2: c.x, y2: c.y - 14 }));
      draw(c);
    }
    target.append(svg("text", { x: n.x, y: n.y, "text-anchor": "middle", class: n.leaf ? "leaf" : "node" }, n.label));
  };
  draw(tree);
}

function parsing() {
  const form = $("parse-form");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = JSON.stringify({ sentences: [$("parse-text").value], ...settings("parse") });
    const answer = await ask("/parse", { method: "POST", headers: { "Content-Type": "application/json" }, body },
      $("parse-error"), $("parse-result"), form.querySelector("button"));
    if (!answer) return;
    const bracket = answer.trees[0];
    $("parse-brackets").textContent = bracket;
    $("parse-score").textContent = fmt(answer.scores[0]);
    const repairs = answer.repairs ? answer.repairs[0] : 0;
    $("parse-repairs").textContent = repairs
      ? `the constrained decoder made ${repairs} repair${repairs === 1 ? "" : "s"} to the bracket sequence`
      : "no repairs were needed";
    drawTree($("parse-tree"), readTree(answer.structures[0]));
    nbest($("parse-nbest-list"), (answer.alternatives || [])[0], "tree");
    $("parse-result").hidden = false;
  });
}

// ---- what the server holds ------------------------------------------------------------------
const SECTIONS = { translation: ["tr", translation], captioning: ["cap", captioning], parsing: ["parse", parsing] };
const started = new Set();

function show(models) {
  // Each task served: its section, its models' names, an example input, and the models' own
  // search settings as the placeholders of the fields a user may change.
  for (const [task, about] of Object.entries(models)) {
    if (!(task in SECTIONS)) continue;
    const [prefix, start] = SECTIONS[task];
    $(task).hidden = false;
    $(prefix + "-models").textContent = about.models.join(" + ") + (about.models.length > 1 ? " (an ensemble)" : "");
    const text = $(prefix + "-text");
    if (text && about.example && !text.value) text.value = about.example;
    if (text) text.placeholder = about.example ? `e.g. ${about.example}` : "";
    if (about.search) $(prefix + "-beam").placeholder = `model's: ${about.search.beam}`;
    if (!started.has(task)) { start(); started.add(task); }
  }
}

async function holds() {
  const status = $("status");
  try {
    const response = await fetch("/models", withKey());
    if (response.status === 401) {
      status.textContent = "This server needs its API key: type it below.";
      $("key-box").open = true;
      return;
    }
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    const models = await response.json();
    show(models);
    status.textContent = `This server holds ${Object.keys(models).join(", ")}.`;
  } catch (error) {
    status.textContent = `Cannot ask the server what it holds: ${error.message}`;
  }
}

$("api-key").addEventListener("input", holds);
holds();
