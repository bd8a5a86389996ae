// The Manager's interactive parts. Every call goes to the REST API the pages are served with;
// data is put into the page as text (never parsed as HTML).
"use strict";

const $ = (selector, root = document) => root.querySelector(selector);
const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];
const CAN_EDIT = () => document.body.dataset.canEdit === "true";
const CAN_ADMIN = () => document.body.dataset.canAdmin === "true";

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== undefined && child !== null && child !== false) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

async function api(method, url, body) {
  const init = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { error: text }; }
  return { ok: response.ok, status: response.status, data, headers: response.headers };
}

function problem(result) {
  const d = result.data || {};
  if (Array.isArray(d.detail)) return d.detail.map((x) => `${(x.loc || []).slice(1).join(".")}: ${x.msg}`).join("; ");
  return d.error || d.detail || `HTTP ${result.status}`;
}

function kbData() {
  const node = $("#kb-data");
  return node ? JSON.parse(node.textContent) : null;
}

const kbUrl = (id, rest = "") => `/ragstore/rags/${encodeURIComponent(id)}${rest}`;
const when = (iso) => (iso ? String(iso).slice(0, 19).replace("T", " ") : "—");

// ---- knowledge base list: health and chunk count, filled in as each answers -------------------
async function loadListHealth() {
  for (const row of $$("tr[data-kb]")) {
    api("GET", kbUrl(row.dataset.kb, "/health")).then((r) => {
      const badge = $("[data-health]", row);
      const status = r.ok ? r.data.status : "error";
      badge.className = `health ${status === "ok" ? "ok" : "bad"}`;
      badge.textContent = status === "ok" ? "ok" : "error";
      badge.title = r.ok ? (r.data.error || `store ${r.data.storeType}: ${status}`) : problem(r);
      const chunks = r.ok ? r.data.details.documents : undefined;
      $("[data-chunks]", row).textContent = chunks === undefined ? "—" : chunks;
    });
  }
}

// ---- the editor: a form generated from the JSON Schema and the providers' parameter schemas --
const PROVIDER_PARAMS = { embeddingParameters: ["embeddings", "embeddingProvider"], storeParameters: ["stores", "storeType"] };
const SECRET = /(api_?key|password|secret|access_?key|credentials|token$)/i;

function mainType(schema) {
  const t = schema.type;
  if (Array.isArray(t)) return t.find((x) => x !== "null") || "string";
  if (t) return t;
  if (schema.enum) return "enum";
  return "json";
}

function fieldId(path) { return "f-" + path.replace(/[^A-Za-z0-9]+/g, "-"); }

function renderField(path, name, schema, value, readonly) {
  const id = fieldId(path);
  const type = schema.enum ? "enum" : mainType(schema);
  const hint = [];
  if (schema.default !== undefined) hint.push(`default ${JSON.stringify(schema.default)}`);
  if (schema.description) hint.push(schema.description);
  const secret = SECRET.test(name);
  if (secret) hint.push("a secret: write a reference, ${env:VAR} or ${eddivault:key}; it is never shown resolved");
  let input;
  const common = { id, name: path, "data-path": path, "data-type": type, "aria-describedby": `${id}-hint ${id}-error`, disabled: readonly };
  if (type === "enum" || type === "boolean") {
    const options = type === "boolean" ? [true, false] : schema.enum;
    input = el("select", common, el("option", { value: "" }, schema.default !== undefined ? `(default: ${schema.default})` : "(not set)"),
      options.map((o) => el("option", { value: JSON.stringify(o), selected: value !== undefined && JSON.stringify(value) === JSON.stringify(o) }, String(o))));
  } else if (type === "integer" || type === "number") {
    input = el("input", { ...common, type: "number", step: type === "integer" ? "1" : "any", value: value ?? "",
      placeholder: schema.default ?? "", min: schema.minimum, max: schema.maximum });
  } else if (type === "string") {
    input = el("input", { ...common, type: "text", value: value ?? "", placeholder: schema.default ?? "", autocomplete: "off", spellcheck: "false" });
  } else {
    input = el("textarea", { ...common, rows: value === undefined ? 2 : 5, spellcheck: "false" },
      value === undefined ? "" : JSON.stringify(value, null, 2));
    hint.push("JSON");
  }
  return el("div", { class: "field", "data-field": path },
    el("label", { for: id }, name, schema.required ? " *" : ""), input,
    el("p", { class: "hint", id: `${id}-hint` }, hint.join(" · ")),
    el("p", { class: "field-error", id: `${id}-error`, role: "alert" }));
}

async function renderParams(container, key, config, readonly) {
  const [kind, selector] = PROVIDER_PARAMS[key];
  const select = $(`[data-path="$.${selector}"]`);
  const provider = (select && readField(select)) || config[selector] || (selector === "storeType" ? "in-memory" : "openai");
  const r = await api("GET", `/providers/${kind}/${encodeURIComponent(provider)}/schema`);
  container.replaceChildren(el("legend", {}, `${key} (${provider})`));
  if (!r.ok) {
    container.append(el("p", { class: "error" }, problem(r)));
    return;
  }
  const values = (config[key] && typeof config[key] === "object") ? config[key] : {};
  for (const [name, schema] of Object.entries(r.data.properties || {})) {
    if (schema["x-alias-of"]) continue;
    const path = `$.${key}.${name}`;
    const value = values[name] !== undefined ? values[name] : values[Object.keys(r.data.properties).find((n) => r.data.properties[n]["x-alias-of"] === name)];
    container.append(renderField(path, name, { ...schema, required: (r.data.required || []).includes(name) }, value, readonly));
  }
  container.append(el("p", { class: "field-error", id: `${fieldId("$." + key)}-error`, "data-field": `$.${key}`, role: "alert" }));
}

function readField(input) {
  const raw = input.value;
  if (raw === "") return undefined;
  const type = input.dataset.type;
  if (type === "enum" || type === "boolean") return JSON.parse(raw);
  if (type === "integer" || type === "number") return Number(raw);
  if (type === "string") return raw;
  try { return JSON.parse(raw); } catch (e) { throw { path: input.dataset.path, message: `not valid JSON: ${e.message}` }; }
}

function collectConfig(original) {
  const config = JSON.parse(JSON.stringify(original));
  const errors = [];
  for (const key of Object.keys(PROVIDER_PARAMS)) {
    const fieldset = $(`fieldset[data-params="${key}"]`);
    if (fieldset) config[key] = {};
  }
  for (const input of $$("#fields [data-path]")) {
    const parts = input.dataset.path.split(".").slice(1);
    let target = config;
    for (const p of parts.slice(0, -1)) target = target[p] ??= {};
    const name = parts[parts.length - 1];
    try {
      const value = readField(input);
      if (value === undefined) delete target[name]; else target[name] = value;
    } catch (e) { errors.push(e); }
  }
  for (const key of Object.keys(PROVIDER_PARAMS)) {
    if (config[key] && !Object.keys(config[key]).length && original[key] === undefined) delete config[key];
  }
  return { config, errors };
}

function showErrors(errors) {
  $$(".field-error").forEach((p) => { p.textContent = ""; });
  $$(".field.invalid").forEach((f) => f.classList.remove("invalid"));
  const unplaced = [];
  for (const e of errors) {
    let path = e.path || "$";
    let slot = null;
    while (!slot && path) {
      slot = $(`#${CSS.escape(fieldId(path))}-error`);
      if (!slot) path = path.includes(".") ? path.slice(0, path.lastIndexOf(".")).replace(/\[\d+\]$/, "") : "";
    }
    if (slot) {
      slot.textContent = (slot.textContent ? slot.textContent + " · " : "") + e.message;
      slot.closest(".field")?.classList.add("invalid");
    } else unplaced.push(`${e.path}: ${e.message}`);
  }
  const first = $(".field.invalid [data-path]");
  if (first) first.focus();
  return unplaced;
}

async function initEditor() {
  const kb = kbData();
  const form = $("#editor");
  const readonly = form.dataset.readonly === "true";
  const fields = $("#fields");
  const [r, registered] = await Promise.all([api("GET", "/ragstore/rags/jsonSchema"), api("GET", "/providers")]);
  if (!r.ok || !registered.ok) { fields.replaceChildren(el("p", { class: "error" }, problem(r.ok ? registered : r))); return; }
  const choices = { storeType: registered.data.stores, embeddingProvider: registered.data.embeddings };
  fields.replaceChildren();
  for (let [name, schema] of Object.entries(r.data.properties)) {
    if (schema["x-alias-of"]) continue;
    if (choices[name]) {  // the registered ones, those whose extra is missing marked
      schema = { ...schema, enum: choices[name].map((p) => p.name),
        description: [schema.description, choices[name].filter((p) => !p.available).map((p) => `${p.name}: not installed`).join(", ")].filter(Boolean).join(" · ") };
    }
    if (PROVIDER_PARAMS[name]) {
      const fieldset = el("fieldset", { "data-params": name });
      fields.append(fieldset);
      continue;
    }
    fields.append(renderField(`$.${name}`, name, { ...schema, required: (r.data.required || []).includes(name) }, kb.config[name], readonly));
  }
  const params = () => Promise.all(Object.keys(PROVIDER_PARAMS).map((k) => renderParams($(`fieldset[data-params="${k}"]`), k, kb.config, readonly)));
  await params();
  for (const [key, [, selector]] of Object.entries(PROVIDER_PARAMS)) {
    $(`[data-path="$.${selector}"]`)?.addEventListener("change", () => renderParams($(`fieldset[data-params="${key}"]`), key, kb.config, readonly));
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const status = $("#save-status");
    const { config, errors } = collectConfig(kb.config);
    if (errors.length) { showErrors(errors); status.textContent = "Fix the fields marked."; return; }
    status.textContent = "Saving…";
    const saved = await api("PUT", kbUrl(kb.id, `?version=${kb.version}`), config);
    if (saved.ok) {
      status.textContent = "Saved.";
      window.location.reload();
    } else if (saved.status === 409) {
      status.textContent = "";
      const conflict = $("#conflict");
      conflict.hidden = false;
      conflict.replaceChildren(
        `Someone saved version ${saved.data.currentVersion} while you were editing version ${kb.version}: reload to see it, then apply your changes again.`,
        " ", el("button", { type: "button", onclick: () => window.location.reload() }, "Reload"));
      conflict.focus();
    } else if (saved.status === 400 && saved.data.errors) {
      const rest = showErrors(saved.data.errors);
      status.textContent = `Not saved: ${saved.data.errors.length} problem(s)` + (rest.length ? ` — ${rest.join("; ")}` : "");
    } else {
      status.textContent = `Not saved: ${problem(saved)}`;
    }
  });
  $("#preview-run").addEventListener("click", () => chunkPreview(kb));
}

function readFileBase64(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

async function chunkPreview(kb) {
  const out = $("#preview-out");
  const { config, errors } = collectConfig(kb.config);
  if (errors.length) { showErrors(errors); return; }
  const file = $("#preview-file").files[0];
  const text = $("#preview-text").value;
  if (!file && !text.trim()) { out.replaceChildren(el("p", { class: "error" }, "Paste a document or pick a file first.")); return; }
  out.replaceChildren(el("p", { class: "muted" }, "Chunking…"));
  const body = file ? { configuration: config, documentName: file.name, base64: await readFileBase64(file) }
                    : { configuration: config, documentName: "pasted.md", text };
  const r = await api("POST", "/ragstore/rags/chunkPreview", body);
  if (!r.ok) {
    if (r.data && r.data.errors) showErrors(r.data.errors);
    out.replaceChildren(el("p", { class: "error" }, r.data && r.data.errors ? "The configuration has problems: see the fields marked." : problem(r)));
    return;
  }
  const chunks = r.data.chunks;
  const avgChars = chunks.length ? Math.round(chunks.reduce((s, c) => s + c.chars, 0) / chunks.length) : 0;
  const avgTokens = chunks.length ? Math.round(chunks.reduce((s, c) => s + c.tokens, 0) / chunks.length) : 0;
  out.replaceChildren(
    el("p", { class: "summary" }, `${chunks.length} chunks of ~${avgChars} chars (~${avgTokens} tokens; the model reads ${r.data.tokenLimit})`,
      r.data.overLimit ? el("span", { class: "error" }, ` · ${r.data.overLimit} over the model's limit (truncated when embedded)`) : ""),
    el("ol", { class: "chunks" }, chunks.map((c) => el("li", { class: c.tokens > r.data.tokenLimit ? "over" : "" },
      el("div", { class: "meta" }, `${c.tokens} tokens · ${c.chars} chars`, c.section ? ` · ${c.section}` : "",
        Object.keys(c.citation || {}).length ? ` · ${Object.entries(c.citation).map(([k, v]) => `${k} ${v}`).join(", ")}` : ""),
      el("pre", {}, c.text)))));
}

// ---- documents: uploads with progress, the ingestion list, the documents, sources ------------
const uploads = new Map(); // ingestionId -> the upload's list item

function upload(kb, file) {
  const bar = el("progress", { max: 100, value: 0, "aria-label": `${file.name} upload` });
  const state = el("span", { class: "state" }, "uploading");
  const item = el("li", {}, el("span", { class: "name" }, file.name), bar, state);
  $("#uploads").append(item);
  const body = new FormData();
  body.append("file", file, file.name);
  const xhr = new XMLHttpRequest();
  xhr.open("POST", kbUrl(kb.id, "/ingest?replace=true")); // uploading a file again replaces it
  xhr.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = Math.round((e.loaded / e.total) * 50); };
  xhr.onload = () => {
    let data = {};
    try { data = JSON.parse(xhr.responseText); } catch { data = { error: xhr.responseText }; }
    if (xhr.status !== 202) {
      state.textContent = `refused: ${data.error || data.detail || xhr.status}`;
      item.classList.add("failed");
      bar.value = 0;
      return;
    }
    const id = data.ingestions[0].ingestionId;
    uploads.set(id, item);
    bar.value = 50;
    state.textContent = "pending";
    pollIngestions(kb);
  };
  xhr.onerror = () => { state.textContent = "the upload failed (network)"; item.classList.add("failed"); };
  xhr.send(body);
}

function statusClass(status) {
  return status.startsWith("failed") ? "failed" : status;
}

let polling = null;
let lastIngestions = "";
const completed = new Set();

async function pollIngestions(kb) {
  if (polling) return;
  polling = true;
  try {
    for (let first = !lastIngestions; ; first = false) {
      const r = await api("GET", kbUrl(kb.id, "/ingestions?limit=50"));
      if (!r.ok) { $("#ingestions").replaceChildren(el("p", { class: "error" }, problem(r))); return; }
      const jobs = r.data;
      const snapshot = JSON.stringify(jobs);
      if (snapshot !== lastIngestions) {  // re-drawn only when something changed: no flicker while polling
        lastIngestions = snapshot;
        renderIngestions(kb, jobs);
        const done = jobs.filter((j) => j.status === "completed" && !completed.has(j.ingestionId));
        done.forEach((j) => completed.add(j.ingestionId));
        if (done.length && !first) loadDocuments(kb);
      }
      if (!jobs.some((j) => j.status === "pending" || j.status === "processing")) return;
      await new Promise((resolve) => setTimeout(resolve, 700));
    }
  } finally {
    polling = null;
  }
}

function progressText(p) {
  // parsing: the pages or rows read so far; embedding: chunks done of all
  if (p.phase === "parsing") return p.unit ? `parsing · ${p.done} ${p.unit}` : "parsing";
  return `embedding ${p.done}/${p.total}`;
}

function renderIngestions(kb, jobs) {
  for (const job of jobs) {
    const item = uploads.get(job.ingestionId);
    if (!item) continue;
    const bar = $("progress", item);
    if (job.status === "completed") bar.value = 100;
    else if (job.progress && job.progress.total) bar.value = 50 + Math.round((job.progress.done / job.progress.total) * 50);
    $(".state", item).textContent = job.status === "completed" ? `completed · ${job.chunks} chunks` : job.status;
    item.className = statusClass(job.status);
  }
  if (!jobs.length) {
    $("#ingestions").replaceChildren(el("p", { class: "empty" }, "Nothing ingested yet."));
    return;
  }
  $("#ingestions").replaceChildren(el("div", { class: "table-wrap" }, el("table", { class: "ingestions" },
    el("thead", {}, el("tr", {}, el("th", {}, "Document"), el("th", {}, "Status"), el("th", { class: "num" }, "Chunks"), el("th", {}, "Updated"), el("th", {}, el("span", { class: "sr-only" }, "Actions")))),
    el("tbody", {}, jobs.map((j) => el("tr", { class: statusClass(j.status), "data-ingestion": j.ingestionId },
      el("td", {}, j.documentName),
      el("td", { class: "status" }, j.status === "processing" && j.progress ? progressText(j.progress) : j.status),
      el("td", { class: "num" }, j.chunks ?? ""),
      el("td", {}, when(j.updatedOn)),
      el("td", {}, j.status.startsWith("failed") && CAN_EDIT()
        ? el("button", { type: "button", class: "link", onclick: async () => {
          const r = await api("POST", kbUrl(kb.id, `/ingestion/${j.ingestionId}/retry`));
          if (!r.ok) alert(problem(r));
          pollIngestions(kb);
        } }, "Retry") : "")))))));
}

async function loadDocuments(kb) {
  const box = $("#documents");
  const r = await api("GET", kbUrl(kb.id, "/documents"));
  if (!r.ok) { box.replaceChildren(el("p", { class: "error" }, problem(r))); return; }
  if (!r.data.documents.length) { box.replaceChildren(el("p", { class: "empty" }, "No documents yet: add some above.")); return; }
  box.replaceChildren(
    r.data.complete ? "" : el("p", { class: "notice" }, "Only the documents of the first chunks read are listed."),
    el("div", { class: "table-wrap" }, el("table", { class: "documents" },
      el("thead", {}, el("tr", {}, el("th", {}, "Document"), el("th", { class: "num" }, "Chunks"), el("th", {}, "Ingested"), el("th", {}, "User"), el("th", {}, el("span", { class: "sr-only" }, "Actions")))),
      el("tbody", {}, r.data.documents.map((d) => el("tr", { "data-document": d.documentId },
        el("td", {}, d.source && d.source !== d.documentId ? `${d.documentId} (${d.source})` : d.documentId),
        el("td", { class: "num" }, d.chunks),
        el("td", {}, d.ingestedAt ? when(new Date(d.ingestedAt * 1000).toISOString()) : "—"),
        el("td", {}, d.userId || "shared"),
        el("td", {}, CAN_EDIT() ? el("button", { type: "button", class: "link danger", onclick: async () => {
          if (!confirm(`Delete ${d.documentId} and its ${d.chunks} chunks from this knowledge base?`)) return;
          const del = await api("DELETE", kbUrl(kb.id, `/documents/${encodeURIComponent(d.documentId)}`));
          if (!del.ok) alert(problem(del));
          loadDocuments(kb);
        } }, "Delete") : "")))))));
}

function renderSources(kb) {
  const box = $("#sources");
  if (!box) return;
  box.replaceChildren(...kb.sources.map((s) => {
    const out = el("div", { class: "source-out", "aria-live": "polite" });
    const show = (node) => out.replaceChildren(node);
    const kind = s.folder ? `folder ${s.folder.path}` : s.web ? `website ${s.web.startUrl}` : s.sitemap ? `sitemap ${s.sitemap.url}` : s.type === "upload" ? "uploaded files" : "source";
    const cron = s.cron || s.schedule;
    const call = async (method, rest) => {
      show(el("p", { class: "muted" }, "…"));
      const r = await api(method, kbUrl(kb.id, `/sources/${encodeURIComponent(s.id)}${rest}`));
      if (!r.ok) { show(el("p", { class: "error" }, problem(r))); return null; }
      return r.data;
    };
    const history = async () => {
      const runs = await call("GET", "/runs?limit=20");
      if (runs) show(runs.length ? el("table", {}, el("thead", {}, el("tr", {}, ["Started", "Status", "Added", "Updated", "Deleted", "Failed"].map((h) => el("th", {}, h)))),
        el("tbody", {}, runs.map((run) => el("tr", {}, el("td", {}, when(run.startedAt)), el("td", {}, run.status),
          ["added", "updated", "deleted", "failed"].map((k) => el("td", { class: "num" }, (run.counts || run)[k] ?? "")))))) : el("p", { class: "empty" }, "Never run."));
    };
    return el("div", { class: "source" },
      el("h3", {}, s.name, " ", el("span", { class: "muted" }, kind, cron ? ` · ${cron} (UTC)` : "", s.enabled === false ? " · disabled" : "")),
      el("div", { class: "buttons" },
        CAN_EDIT() ? el("button", { type: "button", onclick: async () => { if (await call("POST", "/run")) history(); } }, "Run") : "",
        CAN_EDIT() ? el("button", { type: "button", onclick: async () => {
          const p = await call("POST", "/preview");
          if (p) show(el("p", {}, `A run now would add ${p.add.length}, update ${p.update.length}, delete ${p.delete.length}, leave ${p.unchanged.length} unchanged` + (p.failures.length ? `; ${p.failures.length} failing` : "")));
        } }, "Preview") : "",
        el("button", { type: "button", onclick: history }, "History"),
        CAN_EDIT() ? el("button", { type: "button", class: "danger", onclick: async () => {
          if (!confirm(`Forget what source ${s.name} has ingested? Its documents stay searchable; the next run ingests everything it finds again.`)) return;
          const p = await call("DELETE", "/documents");
          if (p) show(el("p", {}, "State forgotten: the next run ingests every document again; documents no longer in the source leave after the runs that miss them."));
        } }, "Purge state") : ""),
      out);
  }));
}

function initDocuments() {
  const kb = kbData();
  const input = $("#files");
  if (input) {
    input.addEventListener("change", () => { [...input.files].forEach((f) => upload(kb, f)); input.value = ""; });
    const zone = $("#dropzone");
    zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (e) => {
      e.preventDefault();
      zone.classList.remove("over");
      [...e.dataTransfer.files].forEach((f) => upload(kb, f));
    });
    $("#paste").addEventListener("submit", (e) => {
      e.preventDefault();
      const name = $("#paste-name").value.trim() || "pasted.md";
      upload(kb, new File([$("#paste-text").value], name, { type: name.endsWith(".md") ? "text/markdown" : "text/plain" }));
      $("#paste-text").value = "";
    });
  }
  pollIngestions(kb);
  loadDocuments(kb);
  renderSources(kb);
}

// ---- try it: scored chunks, the context as injected, the trace, feedback ---------------------
function vote(kb, question, source) {
  const buttons = [];
  const send = (choice) => async () => {
    const r = await api("POST", kbUrl(kb.id, "/feedback"), { query: question, chunkId: source.chunkId, vote: choice,
      source: source.source, citation: source.label });
    if (!r.ok) { alert(problem(r)); return; }
    for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.vote === choice));
  };
  for (const [choice, label] of [["up", "▲ up"], ["down", "▼ down"]]) {
    buttons.push(el("button", { type: "button", class: "vote", "data-vote": choice, "aria-pressed": "false",
      "aria-label": `Thumbs ${choice} for ${source.label}`, title: `Thumbs ${choice}: ${choice === "up" ? "this source answers" : "this source is wrong or irrelevant"}`,
      onclick: send(choice) }, label));
  }
  return el("span", { class: "votes" }, buttons);
}

function initTry() {
  const kb = kbData();
  $("#ask").addEventListener("submit", async (e) => {
    e.preventDefault();
    const out = $("#answer");
    const question = $("#question").value.trim();
    if (!question) return;
    out.replaceChildren(el("p", { class: "muted" }, "Searching…"));
    const common = { query: question, userId: $("#user").value.trim() || null, contextExpansion: $("#expansion").value || null };
    const [query, context] = await Promise.all([api("POST", kbUrl(kb.id, "/query"), common), api("POST", kbUrl(kb.id, "/context"), common)]);
    if (!query.ok || !context.ok) { out.replaceChildren(el("p", { class: "error" }, problem(query.ok ? context : query))); return; }
    const results = query.data.results;
    out.replaceChildren(
      el("section", { class: "card", "aria-labelledby": "chunks-h" }, el("h2", { id: "chunks-h" }, `Scored chunks (${results.length})`),
        results.length ? el("ol", { class: "hits" }, results.map((h) => el("li", { class: "hit" },
          el("div", { class: "meta" }, el("b", { class: "score" }, `score ${h.score.toFixed(4)}`),
            h.rerankScore !== undefined ? ` · rerank ${Number(h.rerankScore).toFixed(4)}` : "", " · ", el("span", { class: "citation" }, h.citation || h.source)),
          el("pre", {}, h.text),
          h.passage && h.passage !== h.text ? el("details", {}, el("summary", {}, `Expanded passage (${h.passage.length} chars)`), el("pre", {}, h.passage)) : "")))
          : el("p", { class: "empty" }, "No chunk scored above the knowledge base's minScore. Try other words, or lower minScore in the configuration.")),
      el("section", { class: "card", "aria-labelledby": "context-h" }, el("h2", { id: "context-h" }, "What the model sees"),
        context.data.section ? el("pre", { id: "context" }, context.data.section) : el("p", { class: "empty" }, "Nothing would be injected: no passage passed."),
        context.data.sources.length ? el("div", {}, el("h3", {}, "Cited sources: was each one right?"),
          el("ul", { class: "sources" }, context.data.sources.map((s) => el("li", {}, vote(kb, question, s), " ", s.label)))) : ""),
      el("section", { class: "card", "aria-labelledby": "trace-h" }, el("h2", { id: "trace-h" }, "rag:trace"),
        el("pre", { id: "trace" }, JSON.stringify(context.data.trace, null, 2))));
  });
}

// ---- agents: a turn through the LlmTask hook -------------------------------------------------
function initAgents() {
  const form = $("#turn");
  if (!form) return;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const out = $("#turn-out");
    out.replaceChildren(el("p", { class: "muted" }, "Running the turn…"));
    const r = await api("POST", `/agentstore/agents/${encodeURIComponent($("#agent").value)}/turn`,
      { message: $("#message").value, userId: $("#turn-user").value.trim() || null });
    if (!r.ok) { out.replaceChildren(el("p", { class: "error" }, problem(r))); return; }
    const t = r.data;
    out.replaceChildren(
      el("section", { class: "card" }, el("h2", {}, `System message (task ${t.taskId})`),
        el("p", { class: "muted" }, `Knowledge bases in the workflows: ${t.knowledgeBases.join(", ") || "none"}`,
          t.skipped.length ? ` · skipped: ${t.skipped.join("; ")}` : ""),
        el("pre", { id: "system-message" }, t.systemMessage || "(empty)")),
      el("section", { class: "card" }, el("h2", {}, "Answer"), t.answer === null
        ? el("p", { class: "empty" }, "No chat model is configured on this server: the turn stopped before the model call.")
        : el("pre", { id: "agent-answer" }, t.answer)),
      el("section", { class: "card" }, el("h2", {}, "Memory entries"),
        Object.keys(t.memory).length ? el("dl", { class: "memory" }, Object.entries(t.memory).map(([k, v]) => [el("dt", {}, k), el("dd", {}, el("pre", {}, typeof v === "string" ? v : JSON.stringify(v, null, 2)))]))
          : el("p", { class: "empty" }, "None written.")));
  });
}

// ---- health: the doctor's checks for each knowledge base -------------------------------------
function initHealth() {
  for (const body of $$("tbody[data-doctor]")) {
    api("GET", kbUrl(body.dataset.doctor, "/doctor")).then((r) => {
      const name = el("a", { href: `/ui/kbs/${encodeURIComponent(body.dataset.doctor)}` }, body.dataset.name);
      if (!r.ok) { body.replaceChildren(el("tr", {}, el("th", { scope: "row" }, name), el("td", { colspan: 4, class: "error" }, problem(r)))); return; }
      body.replaceChildren(...r.data.map((c, i) => el("tr", { class: c.ok ? "ok" : "failed" },
        el("th", { scope: "row" }, i === 0 ? name : ""), el("td", {}, c.check),
        el("td", {}, el("span", { class: `health ${c.ok ? "ok" : "bad"}` }, c.ok ? "ok" : "FAIL")),
        el("td", {}, c.detail), el("td", {}, c.fix))));
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  if ($("tr[data-kb]")) loadListHealth();
  if ($("#editor")) initEditor();
  if ($("#ingestions")) initDocuments();
  if ($("#ask")) initTry();
  initAgents();
  if ($("tbody[data-doctor]")) initHealth();
});
