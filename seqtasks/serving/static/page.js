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

async function ask(path, init, errorBox, resultBox, button) {
  errorBox.hidden = true;
  button.disabled = true;
  try {
    const key = $("api-key").value;
    if (key) init.headers = { ...init.headers, "X-API-Key": key };
    const response = await fetch(path, init);
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

const settings = (prefix) => ({ beam: Number($(prefix + "-beam").value), n_best: Number($(prefix + "-nbest").value) });

function nbest(list, alternatives, key) {
  list.replaceChildren();
  for (const a of alternatives || []) list.append(el("li", {}, `${a[key]} (score ${fmt(a.score)})`));
  list.hidden = !(alternatives && alternatives.length);
}

// ---- translation: a heat map of target pieces × source pieces ---------------------------------
function heatmap(table, rows, columns, weights) {
  table.replaceChildren();
  const head = el("tr");
  head.append(el("th", { scope: "col" }, ""));
  columns.forEach((piece, j) => head.append(el("th", { scope: "col", tabindex: "0", "data-col": j, class: "src" }, piece)));
  table.appendChild(el("thead")).append(head);
  const body = table.appendChild(el("tbody"));
  rows.forEach((piece, i) => {
    const tr = el("tr");
    tr.append(el("th", { scope: "row", tabindex: "0", "data-row": i, class: "tgt" }, piece));
    columns.forEach((_, j) => {
      const w = weights[i][j];
      const td = el("td", { title: `${piece} → ${columns[j]}: ${w.toFixed(3)}`, "data-row": i, "data-col": j });
      td.style.background = `rgba(26, 95, 180, ${w})`;
      tr.append(td);
    });
    body.append(tr);
  });
  const clear = () => table.querySelectorAll(".lit, .on, .dim").forEach((n) => { n.classList.remove("lit", "on", "dim"); n.style.removeProperty("--w"); });
  const light = (header, others, weightOf, cells) => {
    clear();
    header.classList.add("on");
    others.forEach((n, k) => { n.classList.add("lit"); n.style.setProperty("--w", weightOf(k)); });
    table.querySelectorAll("td").forEach((td) => { if (!cells(td)) td.classList.add("dim"); });
  };
  const sources = [...table.querySelectorAll("th.src")], targets = [...table.querySelectorAll("th.tgt")];
  targets.forEach((th, i) => {
    const show = () => light(th, sources, (j) => weights[i][j], (td) => Number(td.dataset.row) === i);
    th.addEventListener("mouseenter", show); th.addEventListener("focus", show);
  });
  sources.forEach((th, j) => {
    const show = () => light(th, targets, (i) => weights[i][j], (td) => Number(td.dataset.col) === j);
    th.addEventListener("mouseenter", show); th.addEventListener("focus", show);
  });
  table.addEventListener("mouseleave", clear);
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
    const s = settings("cap");
    data.append("beam", String(s.beam)); data.append("n_best", String(s.n_best)); data.append("attention", "true");
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
function readTree(text) {
  // "(TOP (S (NP (DT The) (NN dog)) ...))" as {label, children}; a leaf is {label, leaf: true}.
  const tokens = text.match(/\(|\)|[^\s()]+/g) || [];
  let at = 0;
  const node = () => {
    if (tokens[at] !== "(") return { label: tokens[at++], leaf: true, children: [] };
    at++;
    const label = tokens[at] === "(" || tokens[at] === ")" ? "" : tokens[at++];
    const children = [];
    while (at < tokens.length && tokens[at] !== ")") children.push(node());
    at++;
    return { label, children };
  };
  return node();
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
    drawTree($("parse-tree"), readTree(bracket));
    nbest($("parse-nbest-list"), (answer.alternatives || [])[0], "tree");
    $("parse-result").hidden = false;
  });
}

const served = JSON.parse($("served").textContent);
if (served.includes("translation")) translation();
if (served.includes("captioning")) captioning();
if (served.includes("parsing")) parsing();
