// The page of `seqtasks serve`: a section for each task served, built from what GET /models
// says of its endpoint, and the answers drawn by what they hold (views.js, inlined before this).

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

async function ask(path, init, errorBox, resultBox, button, retry) {
  // The answer's body, or null with the reason shown; `retry(status)` may give a request to
  // send instead of failing (every attention over the server's limit: the plain attention).
  errorBox.hidden = true;
  button.disabled = true;
  try {
    const response = await fetch(path, withKey(init));
    const text = await response.text();
    let body;
    try { body = JSON.parse(text); } catch { body = text; }
    const again = !response.ok && retry && retry(response.status);
    if (again) return await ask(path, again, errorBox, resultBox, button);
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
const settings = (find) => {
  const chosen = {};
  for (const [name, id] of [["beam", "beam"], ["n_best", "nbest"]]) {
    const value = find(id).value;
    if (value !== "") chosen[name] = Number(value);
  }
  return chosen;
};

function nbest(list, alternatives) {
  list.replaceChildren();
  for (const a of alternatives || []) list.append(el("li", {}, `${a.text} (score ${fmt(a.score)})`));
  list.hidden = !(alternatives && alternatives.length);
}

// ---- a task's section ---------------------------------------------------------------------------
function section(task, form) {
  // The template's copy for `task`: each data-id an id after the task's name, each data-for a
  // label's `for`; only the inputs its endpoint reads (form.reads: "text" or "image").
  const node = $("task-section").content.firstElementChild.cloneNode(true);
  node.id = task;
  for (const n of node.querySelectorAll("[data-reads]")) if (n.dataset.reads !== form.reads) n.remove();
  for (const n of node.querySelectorAll("[data-id]")) n.id = `${task}-${n.dataset.id}`;
  for (const n of node.querySelectorAll("[data-for]")) n.htmlFor = `${task}-${n.dataset.for}`;
  node.setAttribute("aria-labelledby", `${task}-title`);
  node.querySelector("h2").textContent = form.title;
  node.querySelector("label[data-reads]").textContent = form.prompt;
  node.querySelector("button[type=submit]").textContent = form.action;
  $("tasks").append(node);
  return (name) => $(`${task}-${name}`);
}

function chooser(find) {
  // An image picked with the file input or dropped on the drop area; returns what is chosen.
  const file = find("file"), drop = find("drop");
  let chosen = null;
  const choose = (f) => { chosen = f || null; drop.textContent = chosen ? `Chosen: ${chosen.name}` : "Drop an image here, or press Enter to choose one"; };
  drop.setAttribute("aria-describedby", find("drop-help").id);
  file.addEventListener("change", () => choose(file.files[0]));
  drop.addEventListener("click", () => file.click());
  drop.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); file.click(); } });
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); choose(e.dataTransfer.files[0]); });
  return () => chosen;
}

function request(find, form, attention, chosen) {
  // The request's body: JSON sentences for a text form, a multipart upload for an image;
  // null (and the reason shown) when there is nothing to send.
  const chosenSettings = settings(find);
  if (form.reads === "text") {
    const body = JSON.stringify({ sentences: [find("text").value], ...chosenSettings, ...(attention ? { attention } : {}) });
    return { method: "POST", headers: { "Content-Type": "application/json" }, body };
  }
  const image = chosen();
  if (!image) { find("error").textContent = "Choose an image first."; find("error").hidden = false; return null; }
  const data = new FormData();
  data.append("image", image, image.name);
  for (const [name, value] of Object.entries(chosenSettings)) data.append(name, String(value));
  if (attention) data.append("attention", "true");
  return { method: "POST", body: data };
}

function draw(find, result, image) {
  // A result, drawn by what it holds: its text and score, its alternatives, a tree, its
  // repairs, and its attention over source pieces (a heat map) or over an image's grid.
  find("output").textContent = result.text;
  find("score").textContent = fmt(result.score);
  nbest(find("nbest-list"), result.alternatives);
  const repairs = result.repairs, attention = result.attention;
  find("repairs").hidden = repairs === undefined;
  find("repairs").textContent = repairs
    ? `the constrained decoder made ${repairs} repair${repairs === 1 ? "" : "s"} to the bracket sequence`
    : "no repairs were needed";
  find("result").hidden = false; // shown first: the heat map sizes its cells to the room it has
  find("tree-view").hidden = !result.tree;
  if (result.tree) drawTree(find("tree"), readTree(result.tree));
  find("pieces-view").hidden = !(attention && attention.columns);
  find("picker").hidden = true;
  find("pieces-title").textContent = "Attention: output pieces × source pieces";
  if (result.attentions) picker(find, result.attentions); // every layer and head: choose one
  else if (attention && attention.columns) heatmap(find("heatmap"), attention.rows, attention.columns, attention.weights);
  find("grid-view").hidden = !(attention && attention.grid && image);
  if (attention && attention.grid && image) overlays(find, attention, URL.createObjectURL(image));
}

function start(task, about) {
  const form = about.form, find = section(task, form);
  const chosen = form.reads === "image" ? chooser(find) : () => null;
  find("form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const init = request(find, form, about.attention, chosen);
    if (!init) return;
    let fell = false; // every attention would be over the server's --max-attention: ask for less
    const less = (status) => (status === 413 && about.attention === "all" && (fell = true) ? request(find, form, true, chosen) : null);
    const answer = await ask(form.path, init, find("error"), find("result"), find("form").querySelector("button"), less);
    if (answer) draw(find, answer.results[0], chosen());
    if (answer) find("picker-note").hidden = !fell;
  });
  return find;
}

// ---- what the server holds ------------------------------------------------------------------
const sections = {};

function show(models) {
  // Each task served: its section, its models' names, an example input, and the models' own
  // search settings as the placeholders of the fields a user may change.
  for (const [task, about] of Object.entries(models)) {
    const find = sections[task] || (sections[task] = start(task, about));
    find("title").parentNode.hidden = false;
    find("models").textContent = about.models.join(" + ") + (about.models.length > 1 ? " (an ensemble)" : "");
    const text = find("text");
    if (text && about.example && !text.value) text.value = about.example;
    if (text) text.placeholder = about.example ? `e.g. ${about.example}` : "";
    if (about.search) find("beam").placeholder = `model's: ${about.search.beam}`;
  }
}

let asking = 0; // the latest question to /models: an earlier answer, come late, is dropped

async function holds() {
  const status = $("status"), asked = ++asking, key = $("api-key").value;
  try {
    const response = await fetch("/models", withKey());
    if (asked !== asking) return;
    if (response.status === 401) {
      status.textContent = key
        ? "The server refused this key: check it, then press Use this key (or Enter)."
        : "This server needs its API key: type it below, then press Use this key (or Enter).";
      $("key-box").open = true;
      return;
    }
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    const models = await response.json();
    if (asked !== asking) return;
    show(models);
    status.textContent = `This server holds ${Object.keys(models).join(", ")}.`;
  } catch (error) {
    if (asked === asking) status.textContent = `Cannot ask the server what it holds: ${error.message}`;
  }
}

// The key is tried when applied (its button, or Enter in its field), and half a second after
// it was typed or pasted, so that a half-typed key is not refused at every keystroke.
let typed = 0;
$("api-key").addEventListener("input", () => { clearTimeout(typed); typed = setTimeout(holds, 500); });
$("key-form").addEventListener("submit", (event) => { event.preventDefault(); clearTimeout(typed); holds(); });
holds();
