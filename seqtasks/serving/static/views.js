"use strict";
// What the page of `seqtasks serve` draws of an answer (sections.js sends the requests): attention
// over source pieces as a heat map, attention over an image grid laid over the photo, a tree.
// Everything here talks to this server only (same origin).
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

// ---- attention over source pieces: a heat map of output pieces × source pieces -------------
// sentencepiece's word-start mark, shown as a visible space
const shown = (piece) => piece.replaceAll("\u2581", "\u2423");

// A cell's side, px: the map fills the width it has, up to MAX_CELL a cell and the window's
// height, and below MIN_CELL, where a piece's name would no longer fit, it scrolls.
const MIN_CELL = 14, MAX_CELL = 32;
// A weight's colour: white for 0, then from a light to a dark blue by its square root, so that
// the small weights of a long source (a character model's 0.01s) still show.
const LIGHT = [222, 235, 247], DARK = [8, 48, 107];
const strength = (w) => Math.sqrt(Math.min(Math.max(w, 0), 1));
const shade = (w) => {
  if (!(w > 0)) return "rgb(255, 255, 255)";
  const t = strength(w);
  return `rgb(${LIGHT.map((c, k) => Math.round(c + (DARK[k] - c) * t)).join(", ")})`;
};
const SCALE = [0, 0.01, 0.05, 0.1, 0.25, 0.5, 1]; // the weights the legend shows

function legend(scale) {
  // The colours of SCALE's weights, drawn with `shade` as the cells are.
  if (!scale || scale.childElementCount) return;
  for (const w of SCALE) {
    const swatch = scale.appendChild(el("span", { class: "swatch", "data-weight": w }));
    swatch.append(el("span", { class: "chip", "aria-hidden": "true", style: `background: ${shade(w)}` }), String(w));
  }
}

function cellSize(map, side, rows, columns) {
  // What fits the width beside the row pieces, and the window's height.
  const room = (map.parentNode.clientWidth || document.documentElement.clientWidth) - side.offsetWidth - 2;
  const across = Math.floor(room / Math.max(columns, 1));
  const down = Math.floor(window.innerHeight / Math.max(rows, 1));
  return Math.max(MIN_CELL, Math.min(MAX_CELL, across, down));
}

const drawn = new Map(); // each heat map shown -> what it was drawn from, to redraw on a resize
addEventListener("resize", () => {
  for (const [map, [rows, columns, weights]] of drawn) {
    const side = map.querySelector(".rows");
    if (map.isConnected && side && cellSize(map, side, rows.length, columns.length) !== Number(map.dataset.cell)) {
      heatmap(map, rows, columns, weights);
    }
  }
});

function heatmap(map, rows, columns, weights) {
  // The weights as one canvas, a cell each, between the pieces that name its rows (targets)
  // and columns (sources), each a focusable button; the cells sized to the pieces and the
  // window (`cellSize`), each weight coloured by `shade`. Lighting a row or a column colours
  // the other axis's pieces by their weights and moves two veils over the other cells; the
  // canvas is drawn once, so the largest map an answer may hold stays quick to hover
  // (docs/serving.md, "The page").
  map.replaceChildren();
  drawn.set(map, [rows, columns, weights]);
  legend($(map.id.replace("heatmap", "scale")));
  map.append(el("div", { class: "corner" }));
  const head = map.appendChild(el("div", { class: "cols", role: "group", "aria-label": "source pieces" }));
  const side = map.appendChild(el("div", { class: "rows", role: "group", "aria-label": "target pieces" }));
  const cells = map.appendChild(el("div", { class: "cells" }));
  const piece = (text, attrs) => el("button", { type: "button", ...attrs }, shown(text));
  const sources = columns.map((p, j) => head.appendChild(piece(p, { class: "src", "data-col": j })));
  const targets = rows.map((p, i) => side.appendChild(piece(p, { class: "tgt", "data-row": i })));
  const cell = cellSize(map, side, rows.length, columns.length);
  map.dataset.cell = cell;
  map.style.setProperty("--cell", `${cell}px`);
  const canvas = cells.appendChild(el("canvas", {
    width: columns.length * cell, height: rows.length * cell, role: "img",
    "aria-label": `attention weights of ${rows.length} target pieces over ${columns.length} source pieces`,
  }));
  const context = canvas.getContext("2d");
  weights.forEach((row, i) => row.forEach((w, j) => {
    context.fillStyle = shade(w);
    context.fillRect(j * cell, i * cell, cell, cell);
  }));
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
    others.forEach((n, k) => { n.classList.add("lit"); n.style.setProperty("--w", strength(weightOf(k))); });
    lit = [header, ...others];
  };
  const [width, height] = [canvas.width, canvas.height];
  targets.forEach((button, i) => {
    const show = () => {
      light(button, sources, (j) => weights[i][j]);
      veil(veils[0], 0, 0, width, i * cell);
      veil(veils[1], 0, (i + 1) * cell, width, height - (i + 1) * cell);
      map.dataset.row = i;
    };
    button.addEventListener("mouseenter", show); button.addEventListener("focus", show);
  });
  sources.forEach((button, j) => {
    const show = () => {
      light(button, targets, (i) => weights[i][j]);
      veil(veils[0], 0, 0, j * cell, height);
      veil(veils[1], (j + 1) * cell, 0, width - (j + 1) * cell, height);
      map.dataset.col = j;
    };
    button.addEventListener("mouseenter", show); button.addEventListener("focus", show);
  });
  map.addEventListener("mouseleave", clear);
  const readout = $(map.id.replace("heatmap", "cell"));
  canvas.addEventListener("mousemove", (event) => {
    const i = Math.floor(event.offsetY / cell), j = Math.floor(event.offsetX / cell);
    if (readout && i >= 0 && i < rows.length && j >= 0 && j < columns.length) {
      readout.textContent = `${shown(rows[i])} → ${shown(columns[j])}: ${weights[i][j].toFixed(3)}`;
    }
  });
}

// ---- every attention, by layer and head: a picker over the heat map --------------------------
// What each kind of map is over (the answer's `attentions`: [layer][head][row][column]).
const KINDS = {
  cross: ["Cross-attention: output pieces × source pieces", "target", "memory"],
  encoder: ["Encoder self-attention: source pieces × source pieces", "source", "source"],
  decoder: ["Decoder self-attention: output pieces × the pieces it read", "target", "inputs"],
};
const MEAN = "mean";

const meanOf = (heads) => heads[0].map((row, i) => row.map((_, j) => heads.reduce((sum, h) => sum + h[i][j], 0) / heads.length));

function options(select, values, chosen) {
  // `select`'s options, [value, label] each, keeping `chosen` (else the first) selected.
  select.replaceChildren(...values.map(([value, label]) => el("option", { value }, label)));
  select.value = values.some(([value]) => String(value) === String(chosen)) ? chosen : values[0][0];
}

function picker(find, attentions) {
  // Kind, layer and head of the map the heat map shows; by default the top layer's
  // cross-attention, the mean of its heads (what `attention` alone gives, and its EOS row).
  const kind = find("kind"), layer = find("layer"), head = find("head");
  const kinds = Object.keys(KINDS).filter((k) => attentions[k] && attentions[k].length);
  const redraw = () => {
    const maps = attentions[kind.value];
    options(layer, maps.map((_, l) => [l, `layer ${l}`]), layer.value === "" ? maps.length - 1 : layer.value);
    const heads = maps[Number(layer.value)];
    options(head, [[MEAN, "mean of heads"], ...heads.map((_, h) => [h, `head ${h}`])], head.value || MEAN);
    const [title, rows, columns] = KINDS[kind.value];
    find("pieces-title").textContent = `${title} (layer ${layer.value}, ${head.value === MEAN ? "mean of heads" : `head ${head.value}`})`;
    const weights = head.value === MEAN ? meanOf(heads) : heads[Number(head.value)];
    heatmap(find("heatmap"), attentions[rows], attentions[columns], weights);
  };
  options(kind, kinds.map((k) => [k, KINDS[k][0].split(":")[0]]), "cross");
  layer.value = ""; head.value = "";
  kind.onchange = () => { layer.value = ""; redraw(); };
  layer.onchange = redraw;
  head.onchange = redraw;
  find("picker").hidden = false;
  redraw();
}

// ---- attention over an image grid: each word's weights laid over the photo -------------------
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

// ---- a tree: drawn as a tree -----------------------------------------------------------------
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

function overlays(find, attention, url) {
  // A button per word and a small copy of the image with its weights; the large one shows the
  // word chosen.
  const { rows, weights, grid } = attention;
  const words = find("words"), strip = find("strip"), focus = find("focus");
  find("photo").src = url;
  words.replaceChildren(); strip.replaceChildren();
  const figures = [], buttons = [];
  const show = (k) => {
    paint(focus, weights[k], grid);
    figures.forEach((f, i) => f.classList.toggle("on", i === k));
    buttons.forEach((b, i) => { b.classList.toggle("on", i === k); b.setAttribute("aria-pressed", String(i === k)); });
  };
  rows.forEach((word, k) => {
    const button = el("button", { type: "button", "aria-pressed": "false" }, word);
    for (const kind of ["mouseenter", "focus", "click"]) button.addEventListener(kind, () => show(k));
    words.append(button); buttons.push(button);
    const figure = el("figure", { class: "overlay-figure" });
    const frame = figure.appendChild(el("div"));
    frame.append(el("img", { src: url, alt: "" }));
    paint(frame.appendChild(el("canvas", { class: "overlay", "aria-hidden": "true" })), weights[k], grid);
    figure.append(el("figcaption", {}, word));
    figure.addEventListener("click", () => show(k));
    strip.append(figure); figures.push(figure);
  });
  if (rows.length) show(0);
}
