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
  if (body instanceof FormData) {
    init.body = body;  // multipart: the browser sets its Content-Type
  } else if (body !== undefined) {
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
  const said = d.error || d.detail || `HTTP ${result.status}`;
  return d.fix ? `${said}. Fix: ${d.fix}` : said;
}

function kbData() {
  const node = $("#kb-data");
  return node ? JSON.parse(node.textContent) : null;
}

const kbUrl = (id, rest = "") => `/ragstore/rags/${encodeURIComponent(id)}${rest}`;
const when = (iso) => (iso ? String(iso).slice(0, 19).replace("T", " ") : "—");
// a source run's status in words (the API's enums stay in the API)
const RUN_STATUSES = { COMPLETED: "completed", COMPLETED_WITH_FAILURES: "completed, some documents failing", FAILED: "failed",
  RUNNING: "running", CANCELLED: "cancelled", PENDING: "waiting" };
const runStatus = (run) => { const s = run.outcome || run.status; return RUN_STATUSES[s] || String(s || "").toLowerCase().replace(/_/g, " "); };
// a failing document once: its name, then why (a reason that opens with the name already is not prefixed again)
const failureText = (f) => { const name = f.name || f.document || ""; const reason = String(f.reason || "");
  return !name || reason.startsWith(`${name}:`) ? reason : `${name}: ${reason}`; };

// ---- knowledge base list: health and chunk count, filled in as each answers -------------------
async function loadListHealth() {
  for (const row of $$("table.kbs tr[data-kb]")) {
    api("GET", kbUrl(row.dataset.kb, "/verdict")).then((r) => {
      verdictBadge($("[data-health]", row), r);
      const why = $("[data-health]", row).parentElement;  // the reason in words beside the badge (touch has no hover)
      $(".verdict-why", why)?.remove();
      if (r.ok && r.data.status !== "ok") why.append(el("div", { class: "verdict-why small" }, `${r.data.check}: ${r.data.detail}`));
      const store = r.ok ? r.data.checks.find((c) => c.check === "store") : null;
      const chunks = store && store.level === "ok" ? /(\d+) chunks?/.exec(store.detail) : null;
      $("[data-chunks]", row).textContent = chunks ? chunks[1] : "—";
    });
  }
}

// ---- the create dialog: what the chosen provider and store require, as fields -------------------
function initCreate() {
  const form = $("#create-kb");
  const required = JSON.parse($("#required-params").textContent);
  const draft = JSON.parse($("#create-draft").textContent || "{}");
  const box = $("#new-params");
  const render = () => {
    const fields = [];
    for (const [group, select] of [["embeddingParameters", $("#new-provider")], ["storeParameters", $("#new-store")]]) {
      const known = required[group] || (required[group] = {});
      const name = select.value;
      if (!(name in known)) {  // the page holds the default choice's; another's asked for once, then drawn
        known[name] = [];
        fetch(`/ui/parameters?group=${group}&name=${encodeURIComponent(name)}`, { credentials: "same-origin" })
          .then((r) => (r.ok ? r.json() : []))
          .then((needed) => { known[name] = needed; render(); }, () => {});
      }
      for (const p of known[name]) {
        const id = `new-${group}-${p.name}`;
        const typed = (draft[group] || {})[p.name] || "";
        const hint = p.secret ? `\${env:${select.value.toUpperCase().replace(/[^A-Z0-9]/g, "_")}_${p.name.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}}` : "";
        fields.push(el("label", { for: id }, `${select.value} ${p.name}`,
          p.secret ? el("span", { class: "muted" }, " (the key itself, kept in the vault; or a reference such as " + hint + ")") : ""),
          el("input", { id, name: `${group}.${p.name}`, required: true, value: typed, placeholder: p.secret ? "sk-… or " + hint : hint,
            autocomplete: p.secret ? "new-password" : "off", type: p.secret && !typed.startsWith("${") ? "password" : "text",
            title: p.secret ? "The key: stored encrypted in your tenant's vault and referenced as ${vault:…}; or a reference to one" : p.description }),
          p.description && !p.secret ? el("p", { class: "muted small" }, p.description) : "");  // (a secret's: the label says it)
      }
    }
    box.replaceChildren(...fields);
  };
  $("#new-provider").addEventListener("change", render);
  $("#new-store").addEventListener("change", render);
  render();
  if (form.closest("details").open) $("#new-name").focus();
}

// One verdict per knowledge base (the doctor's checks): ok, warning (it answers, but look), failed; the first
// problem and its fix in the title and beside the badge.
const LEVEL_CLASS = { ok: "ok", warning: "warn", failed: "bad", skipped: "unknown" };  // a verdict's or a check's
function verdictBadge(badge, r) {
  const status = r.ok ? r.data.status : "failed";
  badge.className = `health ${LEVEL_CLASS[status]}`;
  badge.textContent = status;
  badge.dataset.verdict = status;
  badge.title = r.ok ? (status === "ok" ? "all checks passed" : `${r.data.check}: ${r.data.detail}${r.data.fix ? ` · fix: ${r.data.fix}` : ""}`) : problem(r);
  return badge;
}

// ---- the editor: a form generated from the JSON Schema and the providers' parameter schemas --
const PROVIDER_PARAMS = { embeddingParameters: ["embeddings", "embeddingProvider"], storeParameters: ["stores", "storeType"] };
const SECRET = /(api_?key|password|secret|access_?key|credentials|token$)/i;
// what a list field holds, as its placeholder shows it (the schema's examples first)
const LIST_EXAMPLES = { acl: "group:finance, user:bob", include: "*.md, guides/*", exclude: "drafts/*, *.tmp",
  ocrLanguages: "eng, deu", excludePatterns: "/private/*, *.zip", sitemapUrls: "https://example.com/sitemap.xml",
  sites: "contoso.sharepoint.com:/sites/hr", folders: "INBOX, Reports", senders: "*@example.com", requiredMetadata: "author, year" };
const listExample = (name, schema) => (Array.isArray(schema.examples) && Array.isArray(schema.examples[0]) ? schema.examples[0].join(", ")
  : LIST_EXAMPLES[name] || "one, two");

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
  const type = schema.enum ? "enum" : editorType(name, schema);
  const hint = [];
  if (schema["x-help"] || schema.description) hint.push(schema["x-help"] || schema.description);
  if (schema.default !== undefined && schema.default !== null && !["object", "array"].includes(typeof schema.default)) hint.push(`default: ${schema.default}`);
  const secret = schema.writeOnly === true || SECRET.test(name);  // (writeOnly: the schema's mark of a secret field)
  if (secret) hint.push("a secret: a reference, ${vault:key} (Store a key below) or ${env:NAME}; a key typed here is moved into the vault when saved");
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
  } else if (type === "list") {
    input = el("input", { ...common, type: "text", value: (value || []).join(", "), placeholder: `comma-separated, e.g. ${listExample(name, schema)}`, autocomplete: "off" });
  } else if (type === "map") {
    input = mapEditor(common, value || {}, readonly);
  } else if (type === "sources") {
    input = sourcesEditor(common, value || [], readonly, schema.items);
  } else {
    input = el("textarea", { ...common, rows: value === undefined ? 2 : 5, spellcheck: "false" },
      value === undefined ? "" : JSON.stringify(value, null, 2));
    hint.push("JSON");
  }
  const label = schema["x-label"] || name;
  return el("div", { class: "field", "data-field": path },
    el("label", { for: id, title: schema.description || "" }, label, schema.required ? " *" : "", label !== name ? el("code", { class: "key" }, name) : ""), input,
    secret && type === "string" && !readonly && CAN_EDIT() ? storeKey(name, input) : "",
    el("p", { class: "hint", id: `${id}-hint` }, hint.join(" · ")),
    el("p", { class: "field-error", id: `${id}-error`, role: "alert" }));
}

// A secret field's "Store a key in the vault": the key goes to the tenant's vault (PUT /secretstore/secrets), the field
// gets its reference; the key is never put in the page or the configuration.
function storeKey(param, field) {
  const key = el("input", { type: "password", autocomplete: "new-password", "aria-label": `the ${param} key itself` });
  const status = el("span", { role: "status", class: "muted" });
  const store = async () => {
    if (!key.value.trim()) { status.textContent = "Type the key first."; return; }
    const kbName = ($('[data-path="$.name"]')?.value || "kb").toLowerCase();
    const keyName = `${kbName}-${param}`.toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 100);
    const tenant = document.body.dataset.tenant || "default";
    const r = await api("PUT", `/secretstore/secrets/${encodeURIComponent(tenant)}/${encodeURIComponent(keyName)}`,
      { value: key.value, description: `${param} of knowledge base ${kbName}` });
    key.value = "";
    if (!r.ok) { status.textContent = `Not stored: ${problem(r)}`; status.className = "error"; return; }
    field.value = r.data.reference;
    field.dispatchEvent(new Event("input", { bubbles: true }));
    status.className = "muted";
    status.textContent = `Stored in the vault as ${r.data.reference}: save the configuration to use it.`;
  };
  return el("details", { class: "vault-key" }, el("summary", {}, "Store a key in the vault…"),
    el("div", { class: "inline" }, key, el("button", { type: "button", onclick: store }, "Store and use")), status);
}

// Which editor a field gets: its JSON type, or a structured one (a list of words, key/value rows, sources).
function editorType(name, schema) {
  if (name === "sources") return "sources";
  const type = mainType(schema);
  if (type === "array" && schema.items && schema.items.type === "string") return "list";
  if (type === "object" && !schema.properties) return "map";
  return type;
}

// Key/value rows (values read as JSON when they parse: numbers and booleans stay so).
function mapEditor(common, value, readonly) {
  const box = el("div", { ...common, class: "map", role: "group" });
  const row = (k = "", v = "") => el("div", { class: "map-row" },
    el("input", { class: "map-key", value: k, placeholder: "name", "aria-label": "name", disabled: readonly }),
    el("input", { class: "map-value", value: typeof v === "string" ? v : JSON.stringify(v), placeholder: "value", "aria-label": "value", disabled: readonly }),
    readonly ? "" : el("button", { type: "button", class: "link", onclick: (e) => e.target.closest(".map-row").remove() }, "remove"));
  const rows = el("div", {}, Object.entries(value).map(([k, v]) => row(k, v)));
  box.append(rows);
  if (!readonly) box.append(el("button", { type: "button", class: "link", onclick: () => rows.append(row()) }, "+ add a setting"));
  return box;
}

// Each source as a card made from the schema's source item: name, type (what it needs), the fields of its type's block
// (those it needs shown, the others under "More"), who may read what it brings, schedule, on/off. Each field's errors
// show on its card; every other field the source has is kept as it is.
function sourcesEditor(common, value, readonly, item) {
  const box = el("div", { ...common, class: "sources-editor", role: "group" });
  const list = el("div", {});
  const kinds = item.properties.type.enum;
  const needs = item.properties.type["x-needs"] || {};
  const blocks = Object.keys(item.properties).filter((k) => item.properties[k]["x-connector"]);
  const card = (src = {}) => {
    const type = src.type || blocks.find((b) => src[b]) || "web";
    const spec = item.properties[type];  // its block's schema (none: upload)
    const node = el("div", { class: "source-card card", "data-type": type });
    const at = (rest) => `$.sources[${node.index ?? 0}]${rest}`;
    const fields = el("div", { class: "src-fields" }), more = el("div", {});
    const block = src[type] || {};
    node.draw = () => {  // its fields, named by where they are in the list now (errors find them by that path)
      fields.replaceChildren(); more.replaceChildren();
      if (!spec) { fields.append(el("p", { class: "muted small" }, "Files are uploaded to this source on the Documents page.")); return; }
      for (const [name, field] of Object.entries(spec.properties)) {
        const required = (spec.required || []).includes(name);
        const f = renderField(at(`.${type}.${name}`), name, { ...field, required }, block[name], readonly);
        $("[data-path]", f).dataset.block = name;
        // what the card's "Needs" line asks for is in view: the required fields and the secrets (writeOnly: the S3 keys, the
        // IMAP password), the rest under More
        (required || field.writeOnly || block[name] !== undefined ? fields : more).append(f);
      }
    };
    const acl = () => renderField(at(".settings.acl"), "acl", { ...item.properties.settings.properties.acl }, (src.settings || {}).acl, readonly);
    node.index = 0;
    node.renumber = (i) => {  // the ids follow the card's place, so a save's errors land on it
      node.index = i;
      for (const f of $$(".field", node)) {
        const input = $("[data-path]", f);
        if (!input) continue;  // (the card's own error line)
        const rest = input.dataset.path.replace(/^\$\.sources\[\d+\]/, "");
        const id = fieldId(at(rest));
        input.id = id; input.dataset.path = at(rest); input.setAttribute("aria-describedby", `${id}-hint ${id}-error`);
        $("label", f)?.setAttribute("for", id); $(".hint", f).id = `${id}-hint`; $(".field-error", f).id = `${id}-error`;
      }
      $(".card-error", node).id = `${fieldId(at(""))}-error`;
    };
    node.append(
      el("div", { class: "field" }, el("p", { class: "field-error card-error", role: "alert" })),
      el("label", {}, "Name", el("input", { class: "src-name", value: src.name || "", required: true, disabled: readonly })),
      el("label", {}, "Type", el("select", { class: "src-type", disabled: readonly, onchange: (e) => {
        const fresh = card({ ...readSource(node), type: e.target.value });
        node.replaceWith(fresh);
        renumber(list);
      } }, kinds.map((t) => el("option", { selected: t === type }, t)))),
      el("p", { class: "muted small src-needs" }, `Needs ${needs[type] || "its block"}.`),
      fields,
      el("details", { class: "advanced" }, el("summary", {}, `More ${type} settings`), more),
      acl(),
      el("label", {}, "Schedule (cron, optional)", el("input", { class: "src-cron", value: src.cron || src.schedule || "", placeholder: "0 3 * * *", disabled: readonly })),
      el("label", { class: "check" }, el("input", { type: "checkbox", class: "src-enabled", checked: src.enabled !== false, disabled: readonly }), " enabled"),
      readonly ? "" : el("button", { type: "button", class: "link danger", onclick: () => { node.remove(); renumber(list); } }, "Remove this source"));
    node.draw();
    if (!more.children.length) $("details.advanced", node).remove();
    node.source = src;  // its other fields, kept as they are
    node.blocks = blocks;
    return node;
  };
  list.append(...value.map((s) => card(s)));
  renumber(list);
  box.append(list);
  if (!readonly) box.append(el("button", { type: "button", class: "link", onclick: () => { list.append(card({ name: "", type: "web" })); renumber(list); } }, "+ add a source"));
  return box;
}

function renumber(list) { $$(".source-card", list).forEach((c, i) => c.renumber(i)); }

function readSource(node) {
  const type = $(".src-type", node).value;
  const out = { ...node.source, name: $(".src-name", node).value.trim(), type, enabled: $(".src-enabled", node).checked };
  for (const b of node.blocks) if (b !== type) delete out[b];
  if (node.dataset.type === type && node.blocks.includes(type)) {  // the fields shown are its block's
    const block = { ...(node.source[type] || {}) };
    for (const input of $$("[data-block]", node)) {
      const value = readField(input);
      if (value === undefined) delete block[input.dataset.block]; else block[input.dataset.block] = value;
    }
    out[type] = block;
  }
  const acl = readField($('[data-path$=".settings.acl"]', node));
  const settings = { ...(node.source.settings || {}) };
  if (acl === undefined) delete settings.acl; else settings.acl = acl;
  if (Object.keys(settings).length) out.settings = settings; else delete out.settings;
  const cron = $(".src-cron", node).value.trim();
  delete out.schedule;
  if (cron) out.cron = cron; else delete out.cron;
  return out;
}

async function renderParams(container, key, config, readonly) {
  const [kind, selector] = PROVIDER_PARAMS[key];
  const select = $(`[data-path="$.${selector}"]`);
  const provider = (select && readField(select)) || config[selector] || (selector === "storeType" ? "in-memory" : "openai");
  const r = await api("GET", `/providers/${kind}/${encodeURIComponent(provider)}/schema`);
  container.replaceChildren(el("legend", {}, `${container.dataset.label || key}: ${provider}`));
  if (!r.ok) {
    container.append(el("p", { class: "error" }, problem(r)));
    return;
  }
  const values = (config[key] && typeof config[key] === "object") ? config[key] : {};
  const more = el("div", {});  // what it does not need: collapsed unless set
  for (const [name, schema] of Object.entries(r.data.properties || {})) {
    if (schema["x-alias-of"]) continue;
    const path = `$.${key}.${name}`;
    const value = values[name] !== undefined ? values[name] : values[Object.keys(r.data.properties).find((n) => r.data.properties[n]["x-alias-of"] === name)];
    const required = (r.data.required || []).includes(name) || (r.data.anyOf || []).some((a) => (a.required || []).includes(name));
    (required || value !== undefined ? container : more).append(renderField(path, name, { ...schema, required: (r.data.required || []).includes(name) }, value, readonly));
  }
  if (more.children.length) container.append(el("details", { class: "advanced" }, el("summary", {}, `More ${provider} settings (${more.children.length})`), more));
  container.append(el("p", { class: "field-error", id: `${fieldId("$." + key)}-error`, "data-field": `$.${key}`, role: "alert" }));
}

function readField(input) {
  const type0 = input.dataset.type;
  if (type0 === "map") {
    const out = {};
    for (const row of $$(".map-row", input)) {
      const k = $(".map-key", row).value.trim();
      const v = $(".map-value", row).value;
      if (!k) continue;
      try { out[k] = JSON.parse(v); } catch { out[k] = v; }
      if (typeof out[k] === "object" && out[k] !== null) out[k] = v;  // only numbers, booleans and text
    }
    return Object.keys(out).length ? out : undefined;
  }
  if (type0 === "sources") {
    const out = $$(".source-card", input).map(readSource);
    return out.length ? out : undefined;
  }
  if (type0 === "list") {
    const out = input.value.split(",").map((x) => x.trim()).filter(Boolean);
    return out.length ? out : undefined;
  }
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
    if (input.closest(".source-card")) continue;  // (read with its card)
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
      if (!slot) path = /\[\d+\]$/.test(path) ? path.replace(/\[\d+\]$/, "") : path.includes(".") ? path.slice(0, path.lastIndexOf(".")) : "";
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
  if (!readonly && r.data["x-presets"]) fields.append(presetBar(r.data["x-presets"], kb));
  const groups = {};  // each group of the schema: its fieldset, its fields, its advanced ones (collapsed)
  for (const g of [...(r.data["x-groups"] || []), { id: "other", label: "Other" }]) {
    const basic = el("div", {}), advanced = el("div", {});
    const more = el("details", { class: "advanced" }, el("summary", {}, "Advanced"), advanced);
    const set = el("fieldset", { class: "group", "data-group": g.id }, el("legend", {}, g.label), g.help ? el("p", { class: "muted small" }, g.help) : "", basic, more);
    groups[g.id] = { set, basic, advanced, more };
    fields.append(set);
  }
  for (let [name, schema] of Object.entries(r.data.properties)) {
    if (schema["x-alias-of"]) continue;
    if (choices[name]) {  // the registered ones, those whose extra is missing marked
      schema = { ...schema, enum: choices[name].map((p) => p.name),
        "x-help": [schema["x-help"] || schema.description, choices[name].filter((p) => !p.available).map((p) => `${p.name}: not installed`).join(", ")].filter(Boolean).join(" · ") };
    }
    const group = groups[schema["x-group"]] || groups.other;
    const into = schema["x-advanced"] ? group.advanced : group.basic;
    if (PROVIDER_PARAMS[name]) {
      into.append(el("fieldset", { "data-params": name, "data-label": schema["x-label"] || name }));
      continue;
    }
    into.append(renderField(`$.${name}`, name, { ...schema, required: (r.data.required || []).includes(name) }, kb.config[name], readonly));
  }
  for (const g of Object.values(groups)) {
    const set = $$("[data-path]", g.advanced).filter((i) => kb.config[i.dataset.path.slice(2)] !== undefined).length;
    if (!g.advanced.children.length) g.more.remove();
    else if (set) { $("summary", g.more).textContent = `Advanced (${set} set)`; g.more.open = true; }  // what it uses is shown
    if (!g.basic.children.length && !g.advanced.children.length) g.set.remove();
  }
  let dirty = false;  // unsaved edits are not lost silently (from the first key: also while the parameters load)
  form.addEventListener("input", () => { dirty = true; });
  form.addEventListener("change", () => { dirty = true; });
  window.addEventListener("beforeunload", (e) => { if (dirty) { e.preventDefault(); e.returnValue = ""; } });
  const params = () => Promise.all(Object.keys(PROVIDER_PARAMS).map((k) => renderParams($(`fieldset[data-params="${k}"]`), k, kb.config, readonly)));
  const loaded = params();  // (the form answers at once: a save waits for the parameters' fields)
  for (const [key, [, selector]] of Object.entries(PROVIDER_PARAMS)) {
    $(`[data-path="$.${selector}"]`)?.addEventListener("change", () => renderParams($(`fieldset[data-params="${key}"]`), key, kb.config, readonly));
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await loaded;
    const status = $("#save-status");
    const { config, errors } = collectConfig(kb.config);
    if (errors.length) { showErrors(errors); status.textContent = "Fix the fields marked."; return; }
    const change = await embeddingChange(kb, config);
    if (change && !window.confirm(change)) { status.textContent = "Not saved."; return; }
    status.textContent = "Saving…";
    const saved = await api("PUT", kbUrl(kb.id, `?version=${kb.version}`), config);
    if (saved.ok) {
      status.textContent = "Saved.";
      dirty = false;
      const warned = saved.data && saved.data.warnings ? saved.data.warnings[0] : null;  // saved, but it cannot answer yet
      const but = warned && warned.check === "acl" ? "Saved, but" : "Saved, but it cannot answer yet";  // (acl: it answers, to fewer)
      if (warned) window.location.assign(`${window.location.pathname}?error=${encodeURIComponent(`${but}: ${warned.detail}. Fix: ${warned.fix}`)}`);
      else if (change && change.includes("Re-embed")) window.location.assign(`/ui/kbs/${encodeURIComponent(kb.id)}/documents?message=${encodeURIComponent("Saved. Re-embed all to search the stored chunks with the new model.")}`);
      else window.location.reload();
    } else if (saved.status === 409) {
      status.textContent = "";
      const conflict = $("#conflict");
      conflict.hidden = false;
      conflict.replaceChildren(
        `Someone saved version ${saved.data.currentVersion} while you were editing version ${kb.version}: reload to see it, then apply your changes again.`,
        " ", el("button", { type: "button", onclick: () => { dirty = false; window.location.reload(); } }, "Reload"));  // (asked for: the edits go)
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

// Presets from the schema: each sets a few fields in the form (nothing is saved until Save).
function presetBar(presets, kb) {
  return el("div", { class: "presets" }, el("span", { class: "muted" }, "Start from: "), presets.map((p) => el("button", {
    type: "button", class: "preset", title: p.help, "data-preset": p.id, onclick: async () => {
      for (const [key, value] of Object.entries(p.values)) {
        if (PROVIDER_PARAMS[key]) {
          await renderParams($(`fieldset[data-params="${key}"]`), key, { ...kb.config, [key]: value }, false);
          continue;
        }
        const input = $(`[data-path="$.${key}"]`);
        if (!input) continue;
        input.value = input.tagName === "SELECT" ? JSON.stringify(value) : value;
        input.dispatchEvent(new Event("change", { bubbles: true }));
      }
      $("#save-status").textContent = `Preset “${p.label}” applied to the form: review, then save.`;
    } }, p.label)));
}

// What a save would change about the stored chunks of a knowledge base that has some: another embedding model
// (they must be re-embedded; until then searches say why they cannot answer) or another chunking (it applies
// to documents ingested from then on). null: nothing to warn about.
const EMBEDDING_FIELDS = ["embeddingProvider", "embeddingProviderId"];
const MODEL_PARAMS = ["model", "modelName", "deploymentName", "dimensions", "outputDimensionality"];
const CHUNKING_FIELDS = ["chunkStrategy", "chunkSize", "chunkOverlap"];
async function embeddingChange(kb, config) {
  const before = kb.config;
  const same = (a, b) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
  const model = EMBEDDING_FIELDS.some((f) => !same(before[f], config[f]))
    || MODEL_PARAMS.some((p) => !same((before.embeddingParameters || {})[p], (config.embeddingParameters || {})[p]));
  const chunking = CHUNKING_FIELDS.some((f) => !same(before[f], config[f]));
  if (!model && !chunking) return null;
  const health = await api("GET", kbUrl(kb.id, "/health"));
  const chunks = health.ok ? health.data.details.documents || 0 : 0;
  if (!chunks) return null;
  const said = [];
  if (model) said.push(`This changes the embedding model. The ${chunks} stored chunks were embedded with the old one: until you Re-embed all (on Documents, a job with progress), searches of this knowledge base say why they cannot answer.`);
  if (chunking) said.push("This changes the chunking: every document whose file is kept is parsed and chunked again (an ingestion each, on Documents); one ingested as text keeps its chunks until it is ingested again.");
  return `${said.join("\n\n")}\n\nSave anyway?`;
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

// ``name``: the document it is uploaded as (a failed one's, to replace it), else the file's own
function upload(kb, file, name = file.name, replacing = false) {
  const bar = el("progress", { max: 100, value: 0, "aria-label": `${name} upload` });
  const state = el("span", { class: "state" }, "uploading");
  const item = el("li", {}, el("span", { class: "name" }, name), bar, state);
  $("#uploads").append(item);
  const body = new FormData();
  body.append("file", file, name);
  const readers = $("#upload-acl") && !replacing ? $("#upload-acl").value.trim() : "";  // (a file replaced keeps its readers)
  if (readers) body.append("acl", readers);
  const xhr = new XMLHttpRequest();
  xhr.open("POST", kbUrl(kb.id, "/ingest?replace=true")); // uploading a file again replaces it
  xhr.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = Math.round((e.loaded / e.total) * 50); };
  xhr.onload = () => {
    let data = {};
    try { data = JSON.parse(xhr.responseText); } catch { data = { error: xhr.responseText }; }
    if (xhr.status !== 202) {
      state.textContent = `refused: ${data.error || data.detail || xhr.status}`;
      item.classList.add("failed");
      bar.value = 100;
      pollIngestions(kb);  // the refusal is kept in the history
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
let pollAgain = false;  // asked to poll while a poll ran: its list may be older than the upload that asked
let lastIngestions = "";
const completed = new Set();

const ENDED = (s) => s === "completed" || s === "cancelled" || s.startsWith("failed");

// A failed ingestion's status with what fixes it (kept with the job: shown from the first failure on)
function failedText(j) {
  return j.failure ? `${j.status}. Fix: ${j.failure.fix}` : j.status;
}

// The same in the history: what fixes it first, the reason beneath (a long one folded)
function failedCell(j) {
  if (!j.failure) return j.status;
  const reason = j.status.length > 140 ? el("details", { class: "reason" }, el("summary", {}, `${j.status.slice(0, 120)}…`), j.status)
    : el("div", { class: "reason" }, j.status);
  return [el("div", { class: "fix" }, el("b", {}, "Fix: "), j.failure.fix), reason];
}

// Jobs started on this page, followed here to their end: progress, then what came of them, written into
// ``status``; ``then()`` once all ended (to show the new chunks).
async function followJobs(kb, ids, status, doing, done, then = () => {}) {
  status.className = "";
  const wanted = new Set(ids);
  for (let i = 0; i < 1200; i++) {  // (at most 10 minutes of polling; the jobs themselves go on regardless)
    const r = await api("GET", kbUrl(kb.id, `/ingestions?limit=${Math.min(1000, ids.length + 50)}`));
    if (!r.ok) { status.className = "error"; status.textContent = `${doing}: ${problem(r)}`; return; }
    const jobs = r.data.filter((j) => wanted.has(j.ingestionId));
    const ended = jobs.filter((j) => ENDED(j.status));
    const failed = ended.filter((j) => j.status !== "completed");
    if (ended.length === jobs.length) {
      const chunks = ended.reduce((n, j) => n + (j.chunks || 0), 0);
      if (ids.length === 1 && failed.length) {
        status.className = "error";
        status.textContent = `${doing} ended ${failedText(failed[0])}`;
      } else {
        status.className = failed.length ? "error" : "";
        status.textContent = `${done}: ${ids.length > 1 ? `${ended.length - failed.length} document(s), ` : ""}${chunks} chunk(s).` +
          (failed.length ? ` ${failed.length} failed: ${failed.map((j) => j.documentName).join(", ")} (why and what fixes it: below).` : "");
      }
      then();
      return;
    }
    const running = jobs.find((j) => j.status === "processing" && j.progress);
    status.textContent = ids.length === 1 ? `${doing}… ${running ? progressText(running.progress) : jobs[0].status}`
      : `${doing}… ${ended.length} of ${ids.length} done${failed.length ? `, ${failed.length} failed` : ""}`;
    await new Promise((ok) => setTimeout(ok, 500));
  }
}

async function pollIngestions(kb) {
  if (polling) { pollAgain = true; return; }
  polling = true;
  try {
    for (let first = !lastIngestions; ; first = false) {
      pollAgain = false;
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
      if (!pollAgain && !jobs.some((j) => j.status === "pending" || j.status === "processing")) return;
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

// A button that starts a job over the whole knowledge base once confirmed, then follows it to its end in the
// status beside the buttons (and the ingestions below); ``started(data)``: the ingestions its answer names.
function kbJobButton(kb, selector, question, path, doing, done, started, note = () => "") {
  const button = $(selector);
  if (!button) return;
  button.addEventListener("click", async () => {
    if (!window.confirm(question)) return;
    const status = $("#kb-job-status");
    const r = await api("POST", kbUrl(kb.id, path));
    if (!r.ok) { status.className = "error"; status.textContent = `${doing}: ${problem(r)}`; return; }
    pollIngestions(kb);
    const ids = started(r.data);
    if (!ids.length) { status.textContent = note(r.data) || "Nothing to do."; return; }
    await followJobs(kb, ids, status, doing, done, () => loadDocuments(kb));
    if (note(r.data)) status.append(` ${note(r.data)}`);
  });
}

function initReembed(kb) {
  kbJobButton(kb, "#reembed", "Re-embed every chunk of this knowledge base with its current embedding model? Until it finishes, searches use the vectors stored now, or say why they cannot.", "/reembed",
    "Re-embedding", "Re-embedded", (data) => [data.ingestionId]);
}

function initReparseAll(kb) {
  kbJobButton(kb, "#reparse-all", "Parse and chunk every kept file of this knowledge base again with its current configuration? Chunks switched off stay off where their text is unchanged.", "/reparse",
    "Re-parsing", "Re-parsed", (data) => data.ingestions.map((j) => j.ingestionId),
    (data) => data.notKept.length ? `Not kept, upload again to re-parse: ${data.notKept.join(", ")}.` : "");
}

function renderIngestions(kb, jobs) {
  for (const job of jobs) {
    const item = uploads.get(job.ingestionId);
    if (!item) continue;
    const bar = $("progress", item);
    if (job.status === "completed") bar.value = 100;
    else if (job.progress && job.progress.total) bar.value = 50 + Math.round((job.progress.done / job.progress.total) * 50);
    $(".state", item).textContent = job.status === "completed" ? `completed · ${job.chunks} chunks` : failedText(job);
    if (job.status.startsWith("failed") || job.status === "cancelled") bar.value = 100;  // drawn as a failure, not half done
    item.className = `upload ${statusClass(job.status)}`;
  }
  if (!jobs.length) {
    $("#ingestions").replaceChildren(el("p", { class: "empty" }, "Nothing ingested yet."));
    return;
  }
  // one row per document: its latest ingestion, the earlier ones folded beneath its status
  const byDocument = new Map();
  for (const j of jobs) (byDocument.get(j.documentId) || byDocument.set(j.documentId, []).get(j.documentId)).push(j);
  $("#ingestions").replaceChildren(el("div", { class: "table-wrap" }, el("table", { class: "ingestions stack" },
    el("thead", {}, el("tr", {}, el("th", {}, "Document"), el("th", {}, "Status"), el("th", {}, el("span", { class: "sr-only" }, "Actions")))),
    el("tbody", {}, [...byDocument.values()].map(([j, ...earlier]) => el("tr", { class: statusClass(j.status), "data-ingestion": j.ingestionId },
      el("td", { "data-label": "Document" }, j.documentName),
      el("td", { class: "status", "data-label": "Status" },
        j.status === "processing" && j.progress ? progressText(j.progress) : j.status === "completed" ? `completed · ${j.chunks} chunk(s)` : failedCell(j),
        el("div", { class: "muted small" }, when(j.updatedOn)),
        earlier.length ? el("details", { class: "earlier" }, el("summary", {}, `${earlier.length} earlier`),
          el("ul", {}, earlier.map((e) => el("li", {}, `${when(e.updatedOn)}: ${e.status}${e.chunks != null ? ` · ${e.chunks} chunk(s)` : ""}`)))) : ""),
      el("td", { class: "actions" }, CAN_EDIT() ? fixButton(kb, j) : "")))))));
}

// What a failed ingestion offers: Replace… when the file is at fault (retrying cannot help), else Retry.
function fixButton(kb, j) {
  if (!j.status.startsWith("failed")) return "";
  if ((j.failure && j.failure.kind === "file") || j.status.startsWith("failed: refused: ")) {
    const input = el("input", { type: "file", class: "sr-only", style: "left: 0; top: 0", "aria-label": `Replace ${j.documentName}`,  // (inside the table: no sideways scroll)
      onchange: (e) => { if (e.target.files[0]) upload(kb, e.target.files[0], j.documentName, true); } });
    return el("span", {}, el("button", { type: "button", class: "link", onclick: () => input.click() }, "Replace…"), input);
  }
  return el("button", { type: "button", class: "link", onclick: async () => {
    const r = await api("POST", kbUrl(kb.id, `/ingestion/${j.ingestionId}/retry`));
    if (!r.ok) alert(problem(r));
    pollIngestions(kb);
  } }, "Retry");
}

async function loadDocuments(kb) {
  const box = $("#documents");
  const r = await api("GET", kbUrl(kb.id, "/documents"));
  if (!r.ok) { box.replaceChildren(el("p", { class: "error" }, problem(r))); return; }
  if (!r.data.documents.length) { box.replaceChildren(el("p", { class: "empty" }, "No documents yet: add some above.")); return; }
  const acl = kb.audience === "DOCUMENT_ACL";  // read by each document's readers: show them
  box.replaceChildren(
    r.data.complete ? "" : el("p", { class: "notice" }, "Only the documents of the first chunks read are listed."),
    el("div", { class: "table-wrap" }, el("table", { class: "documents" },
      el("thead", {}, el("tr", {}, el("th", {}, "Document"), el("th", { class: "num" }, "Chunks"), el("th", {}, "Language"), el("th", {}, "Ingested"),
        acl ? el("th", {}, "Readers") : "", el("th", { title: "a document ingested by a key bound to a user is that user's alone" }, "Private to"),
        el("th", {}, el("span", { class: "sr-only" }, "Actions")))),
      el("tbody", {}, r.data.documents.map((d) => el("tr", { "data-document": d.documentId },
        el("td", {}, el("a", { href: `/ui/kbs/${encodeURIComponent(kb.id)}/document?d=${encodeURIComponent(d.documentId)}` },
          d.source && d.source !== d.documentId ? `${d.documentId} (${d.source})` : d.documentId)),
        el("td", { class: "num" }, d.chunks, d.disabled ? el("span", { class: "muted" }, ` (${d.disabled} off)`) : ""),
        el("td", { title: "what the document's text was found to be in (the knowledge base's language: auto detects it)" }, d.language || "—"),
        el("td", {}, d.ingestedAt ? when(new Date(d.ingestedAt * 1000).toISOString()) : "—"),
        acl ? el("td", { class: d.acl && d.acl.length ? "readers" : "readers nobody" }, d.acl && d.acl.length ? d.acl.join(", ") : "nobody") : "",
        el("td", {}, d.userId || "—"),
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
    let shown = 0;  // what the card's output shows was asked for last: a run followed stops writing once another shows
    const show = (node) => { shown += 1; out.replaceChildren(node); return shown; };
    const kind = el("span", {}, s.type || "source");  // what it reads, as its connector says (status: where)
    const cron = s.cron || s.schedule;
    const call = async (method, rest) => {
      show(el("p", { class: "muted" }, "…"));
      const r = await api(method, kbUrl(kb.id, `/sources/${encodeURIComponent(s.id)}${rest}`));
      if (!r.ok) { show(el("p", { class: "error" }, problem(r))); return null; }
      return r.data;
    };
    const history = async () => {
      const runs = await call("GET", "/runs?limit=20");
      if (runs) show(runs.length ? el("table", {}, el("thead", {}, el("tr", {}, ["Started", "What", "Status", "Added", "Updated", "Deleted", "Failed"].map((h) => el("th", {}, h)))),
        el("tbody", {}, runs.map((run) => el("tr", { class: run.status === "FAILED" ? "failed" : "" }, el("td", {}, when(run.startedAt)),
          el("td", {}, run.kind === "permissions" ? "Permission sync" : "Run"),
          el("td", { class: "status" }, runStatus(run), run.status === "FAILED" && run.error ? el("div", { class: "muted reason" }, run.error) : "",
            run.message ? el("div", { class: "muted" }, run.message) : "",
            (run.failures || []).length ? el("div", { class: "muted reason" }, run.failures.slice(0, 5).map(failureText).join("; ")) : ""),
          ["added", "updated", "deleted", "failed"].map((k) => el("td", { class: "num" }, (run.counts || run)[k] ?? "")))))) : el("p", { class: "empty" }, "Never run."));
    };
    const facts = el("dl", { class: "source-status" });
    const extra = el("span", {});
    const summary = (run) => run ? `${when(run.startedAt)} · ${runStatus(run)}` + (run.status === "FAILED" ? `: ${run.error || ""}${run.fix ? `. To fix: ${run.fix}` : ""}` :
      ` · added ${run.added || 0}, updated ${run.updated || 0}, deleted ${run.deleted || 0}` + (run.failed ? `, ${run.failed} failing` : "")) : "never";
    const status = async () => {
      const r = await api("GET", kbUrl(kb.id, `/sources/${encodeURIComponent(s.id)}/status`));
      if (!r.ok) return null;
      const st = r.data;
      kind.textContent = st.where;
      const row = (k, v) => [el("dt", {}, k), el("dd", {}, v)];
      facts.replaceChildren(...row("Needs", st.needs), ...row("Documents", String(st.documents)),
        ...row("Last run", summary(st.lastRun)), ...row("Next run", st.nextRun ? when(st.nextRun) : "on request"),
        ...row("Cursor", st.cursor ? "kept: the next run reads what changed" : "none: the next run lists everything"),
        ...(st.keepsPermissions ? row("Permissions", `synced every ${st.permissionSyncMinutes} min; last: ${summary(st.lastPermissionSync)}`) : []),
        ...((st.failing || []).length ? row("Failing", el("ul", { class: "failing" }, st.failing.slice(0, 10).map((f) => el("li", {}, `${f.name}: ${f.reason}`)),
          st.failing.length > 10 ? el("li", {}, `and ${st.failing.length - 10} more`) : "")) : []));
      extra.replaceChildren(
        CAN_EDIT() && st.cursor ? el("button", { type: "button", onclick: async () => { if (await call("POST", "/reset-cursor")) { show(el("p", {}, "Cursor reset: the next run lists the source in full.")); status(); } } }, "Reset cursor") : "",
        CAN_EDIT() && (st.failing || []).length ? el("button", { type: "button", class: "src-retry", onclick: async () => {
          const r = await call("POST", "/retry"); if (r) { show(el("p", { class: "run-end" }, `Retried: ${summary(r)}`)); status(); } } }, `Retry ${st.failing.length} failing`) : "",
        CAN_EDIT() && st.keepsPermissions ? el("button", { type: "button", class: "src-sync", onclick: async () => { const r = await call("POST", "/sync-permissions"); if (r) follow("permissions", r.runId); } }, "Sync permissions") : "");
      return st;
    };
    // A run (or permission sync) followed to its end: its counts as they grow, then its outcome and the history.
    const follow = async (kind, runId) => {
      const last = kind === "permissions" ? "lastPermissionSync" : "lastRun";
      let mine = shown;
      for (let i = 0; i < 3600; i++) {
        await new Promise((r) => setTimeout(r, i ? 1000 : 300));
        const st = await status();
        const run = st && st[last];
        if (shown !== mine) return;  // the user asked for something else meanwhile (History): the card's status follows on
        if (!run || run.runId !== runId) continue;
        if (run.status !== "RUNNING") { show(el("p", { class: `run-end ${run.status === "FAILED" ? "error" : ""}` }, `Finished: ${summary(run)}`)); return; }
        mine = show(el("p", { class: "muted run-progress", role: "status" }, `Running: ${run.documentsSeen || 0} listed, ${run.added || 0} added, ` +
          `${run.updated || 0} updated, ${run.unchanged || 0} unchanged, ${run.deleted || 0} deleted, ${run.failed || 0} failed…`));
      }
    };
    status();
    return el("div", { class: "source", "data-source": s.id },
      el("h3", {}, s.name, " ", el("span", { class: "muted" }, kind, cron ? ` · ${cron} (UTC)` : "", s.enabled === false ? " · disabled" : "")),
      facts,
      el("div", { class: "buttons" },
        CAN_EDIT() ? el("button", { type: "button", class: "src-run", onclick: async () => { const r = await call("POST", "/run"); if (r) follow("run", r.runId); } }, "Run") : "",
        CAN_EDIT() ? el("button", { type: "button", onclick: async () => {
          const t = await call("POST", "/test");
          if (t) show(el("p", { class: t.ok ? "" : "error" }, t.ok ? "Connection works: the source can be read." : `Cannot read it: ${t.error}`));
        } }, "Test connection") : "",
        CAN_EDIT() ? el("button", { type: "button", onclick: async () => {
          const p = await call("POST", "/preview");
          if (p) show(el("p", {}, `A run now would add ${p.add.length}, update ${p.update.length}, delete ${p.delete.length}, leave ${p.unchanged.length} unchanged` + (p.failures.length ? `; ${p.failures.length} failing` : "")));
        } }, "Preview") : "",
        el("button", { type: "button", onclick: history }, "History"),
        CAN_EDIT() ? el("button", { type: "button", class: "danger", onclick: async () => {
          if (!confirm(`Forget what source ${s.name} has ingested? Its documents stay searchable; the next run ingests everything it finds again.`)) return;
          const p = await call("DELETE", "/documents");
          if (p) show(el("p", {}, "State forgotten: the next run ingests every document again; documents no longer in the source leave after the runs that miss them."));
        } }, "Purge state") : "", extra),
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
  initReembed(kb);
  initReparseAll(kb);
}

// ---- one document: its chunks with where they are, switched on or off; re-parse; replace the file --------
// A page of a PDF or an image, drawn by the server, with a chunk's place on it marked (its boxes: fractions of the page).
function pageView(kb, documentId, page, boxes) {
  const img = el("img", { src: kbUrl(kb.id, `/page?documentId=${encodeURIComponent(documentId)}&page=${page}`),
    alt: `Page ${page} of ${documentId}` });
  const pct = (v) => `${(v * 100).toFixed(2)}%`;
  const regions = boxes.map(([left, top, right, bottom]) => el("span", { class: "region", "aria-hidden": "true",
    style: `left:${pct(left)};top:${pct(top)};width:${pct(right - left)};height:${pct(bottom - top)}` }));
  img.addEventListener("error", () => img.replaceWith(el("p", { class: "error" },
    `Page ${page} cannot be shown: the document's file was not kept (ingested before files were kept, or as text).`)));
  return el("figure", { class: "page-view" }, el("div", { class: "page-frame" }, img, regions),
    el("figcaption", { class: "muted" }, `Page ${page}, the chunk's place marked`));
}

// "Show on page": the page opens when asked for, under its toggle or where ``place`` puts it (``place(figure)``
// returns what to remove when the toggle closes).
function onPage(kb, documentId, page, boxes, place) {
  const box = el("details", { class: "on-page" }, el("summary", {}, `Show on page ${page}`));
  let shown = null;
  box.addEventListener("toggle", () => {
    if (box.open && !shown) {
      const figure = pageView(kb, documentId, page, boxes);
      shown = place ? place(figure) : box.appendChild(figure);
    } else if (!box.open && shown) { shown.remove(); shown = null; }
  });
  return box;
}

// Who may read the document (audience DOCUMENT_ACL): shown to everyone who sees it, changed by an editor at once
// (PATCH …/documents/{id}: its chunks' ACL rewritten, nothing embedded again).
function showAcl(kb, acl) {
  const box = $("#doc-acl");
  if (!box) return;
  const shown = el("p", { id: "acl-now" }, acl && acl.length ? acl.join(", ") : "No one: this document has no ACL (under audience DOCUMENT_ACL nobody reads it).");
  if (!CAN_EDIT()) { box.replaceChildren(shown); return; }
  const input = el("input", { id: "acl-input", value: (acl || []).join(", "), placeholder: "group:finance, user:bob, deny:user:carol",
    "aria-label": "Who may read this document" });
  const status = el("span", { id: "acl-status", role: "status", class: "muted" });
  const form = el("form", { class: "ask", id: "acl-form", onsubmit: async (e) => {
    e.preventDefault();
    const entries = input.value.split(",").map((p) => p.trim()).filter(Boolean);
    const r = await api("PATCH", kbUrl(kb.id, `/documents/${encodeURIComponent(kb.document)}`), { acl: entries });
    if (!r.ok) { status.textContent = problem(r); return; }
    shown.textContent = r.data.acl.length ? r.data.acl.join(", ") : "No one: this document has no ACL.";
    status.textContent = `Saved on its ${r.data.chunks} chunk${r.data.chunks === 1 ? "" : "s"}: the next search honours it.`
      + ((r.data.warnings || []).length ? ` Check: ${r.data.warnings.join("; ")}` : "");
  } }, el("div", { class: "grow" }, input), el("button", { type: "submit", class: "primary" }, "Save readers"), status);
  box.replaceChildren(shown, form);
}

async function initDocument() {
  const kb = kbData();
  const box = $("#doc-chunks");
  const load = async () => {
    const r = await api("GET", kbUrl(kb.id, `/chunks?documentId=${encodeURIComponent(kb.document)}`));
    if (!r.ok) { box.replaceChildren(el("p", { class: "error" }, problem(r))); return; }
    const jobs = await api("GET", kbUrl(kb.id, "/ingestions?limit=100"));  // the last ingestion's warnings: what to check
    const last = jobs.ok ? jobs.data.find((j) => j.documentName === kb.documentName) : null;
    $("#doc-warnings")?.remove();
    if (last && last.warnings && last.warnings.length) {
      box.before(el("div", { class: "notice", id: "doc-warnings" }, el("b", {}, "After the last ingestion: "), last.warnings.join(" ")));
    }
    showAcl(kb, r.data.acl);
    const reparse = $("#reparse");
    if (reparse) {
      reparse.disabled = !r.data.reparsable;
      reparse.title = r.data.reparsable ? "Parse and chunk the kept file again with the current configuration"
        : "Its file was not kept (ingested before files were kept): use Replace file";
    }
    box.replaceChildren(el("div", { class: "table-wrap" }, el("table", { class: "chunk-table" },
      el("thead", {}, el("tr", {}, el("th", { class: "num" }, "#"), el("th", {}, "Where"), el("th", {}, "Text"), el("th", {}, "In search"))),
      el("tbody", {}, r.data.chunks.map((c) => el("tr", { "data-chunk": c.id, class: c.enabled ? "" : "off" },
        el("td", { class: "num" }, c.position),
        el("td", {}, c.where || "—", c.boxes && !c.attachment ? onPage(kb, kb.document, c.page, c.boxes, (figure) => {
          const row = el("tr", { class: "page-row", "data-page-of": c.id }, el("td", { colspan: 4 }, figure));
          $(`tr[data-chunk="${CSS.escape(c.id)}"]`, box).after(row);
          return row;
        }) : ""),
        el("td", {}, el("details", {}, el("summary", {}, c.text.length > 90 ? `${c.text.slice(0, 90)}…` : c.text), el("pre", {}, c.text))),
        el("td", {}, CAN_EDIT() ? el("label", { class: "switch" }, el("input", { type: "checkbox", checked: c.enabled, "aria-label": `chunk ${c.position} in search`,
          onchange: async (e) => {
            const done = await api("PATCH", kbUrl(kb.id, `/chunks/${encodeURIComponent(c.id)}`), { enabled: e.target.checked });
            if (!done.ok) { alert(problem(done)); e.target.checked = !e.target.checked; return; }
            e.target.closest("tr").className = e.target.checked ? "" : "off";
            $(".state", e.target.closest("label")).textContent = e.target.checked ? " on" : " off";  // what it says now
          } }), el("span", { class: "state" }, c.enabled ? " on" : " off")) : (c.enabled ? "on" : "off"))))))));
  };
  // A re-parse or replace followed here to its end: its progress, then the new chunks (or why it failed).
  const follow = (ingestionId, doing, done) => followJobs(kb, [ingestionId], $("#doc-status"), doing, done, load);
  $("#reparse")?.addEventListener("click", async () => {
    const r = await api("POST", kbUrl(kb.id, `/reparse?documentId=${encodeURIComponent(kb.document)}`));
    if (!r.ok) { $("#doc-status").textContent = problem(r); return; }
    follow(r.data.ingestionId, "Re-parsing", "Re-parsed");
  });
  $("#replace")?.addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    const body = new FormData();
    body.append("file", file, kb.documentName);  // under the document's name: its chunks are replaced
    const r = await api("POST", kbUrl(kb.id, "/ingest?replace=true"), body);
    if (!r.ok) { $("#doc-status").textContent = `Not replaced: ${problem(r)}`; return; }
    follow(r.data.ingestions[0].ingestionId, `Replacing with ${file.name}`, `Replaced with ${file.name}`);
  });
  load();
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

// Why a result stands where it does when that is not its score: the two parts of a hybrid rank, or the tie rule.
function ranking(r) {
  if (r.tie) return `Moved up: ${r.tie}.`;
  const side = (name, part) => (part ? `${name} #${part.rank} (${name === "keyword" ? `BM25 ${part.bm25}` : `cosine ${part.similarity}`})`
    : name === "keyword" ? "keyword: none of the words" : `${name}: not found`);
  if (r.by === "keyword") return `Ranked by ${side("keyword", r.keyword)}.`;
  if (r.by.startsWith("keyword: ")) return `Ranked by ${side("keyword", r.keyword)} (${r.by.slice(9)}).`;
  return `Ranked by ${r.by === "rrf" ? "RRF" : "weighted score"} ${r.fused}: ${side("vector", r.vector)}, ${side("keyword", r.keyword)}.`;
}

// The one score a hit is shown with: the one its place in the order comes from and minScore keeps to (a reranker's when
// one reordered the results); a fused one is on the relevance scale (issue 45).
function orderingScore(h) {
  if (h.rerankScore !== undefined) return `rerank ${Number(h.rerankScore).toFixed(4)}`;
  return `${h.ranking && h.ranking.fused !== undefined ? "score" : "relevance"} ${h.score.toFixed(4)}`;
}

// A passage with the sentences that match the question marked (else the hit's chunk, at [start, end)).
function highlighted(text, offsets, matches) {
  const spans = matches && matches.length ? matches : offsets ? [offsets] : [];
  const parts = [];
  let at = 0;
  for (const [start, end] of spans) {
    parts.push(text.slice(at, start), el("mark", {}, text.slice(start, end)));
    at = end;
  }
  return el("pre", {}, parts, text.slice(at));
}

// The kept test questions: listed, run beside their baselines, accepted, deleted.
function initQuestions(kb) {
  const box = $("#questions");
  const status = $("#questions-status");
  const list = async () => {
    const r = await api("GET", kbUrl(kb.id, "/questions"));
    if (!r.ok) { box.replaceChildren(el("p", { class: "error" }, problem(r))); return; }
    box.replaceChildren(r.data.length ? el("ul", { class: "questions" }, r.data.map((q) => el("li", { "data-question": q.id },
      q.question, el("span", { class: "muted" }, ` · as ${q.asUser ? `user ${q.asUser}` : "nobody"} · ${q.baseline.length} passage(s) at version ${q.baselineVersion}`),
      CAN_EDIT() ? [" ", el("button", { type: "button", class: "link danger", onclick: async () => {
        await api("DELETE", kbUrl(kb.id, `/questions/${q.id}`)); list();
      } }, "Delete")] : "")))
      : el("p", { class: "empty" }, "No test questions yet: ask one above and keep it, or keep one from a vote on the Feedback page."));
  };
  $("#keep-question")?.addEventListener("click", async () => {
    const question = $("#question").value.trim();
    if (!question) { status.textContent = "Ask a question first."; return; }
    const chunk = new URLSearchParams(window.location.search).get("chunk");
    const asUser = $("#user").value.trim();  // asked as the user of the question asked (permissions): else as nobody
    const r = await api("POST", kbUrl(kb.id, "/questions"), { question, chunkId: chunk || null, asUser: asUser || null });
    status.textContent = r.ok ? `Kept, asked as ${asUser ? `user ${asUser}` : "nobody"}.` : problem(r);
    list();
  });
  $("#run-questions").addEventListener("click", async () => {
    status.textContent = "Running…";
    const r = await api("POST", kbUrl(kb.id, "/question-runs"));
    if (!r.ok) { status.textContent = problem(r); return; }
    status.textContent = `${r.data.changed} of ${r.data.results.length} answer(s) changed since their baseline (configuration version ${r.data.version}).`;
    const accept = (path, rows) => async (e) => {
      const done = await api("POST", kbUrl(kb.id, path));
      if (!done.ok) { e.target.replaceWith(problem(done)); return; }
      for (const row of rows(e)) {  // the row says what it is now: its answer is the baseline (issue 45)
        $(".accept", row)?.replaceWith("accepted");
        row.classList.replace("changed", "same");
        const tag = $('td[data-label="Result"] .tag.changed', row);
        if (tag) { tag.className = "tag same"; tag.textContent = "accepted"; }
      }
      e.target.replaceWith("accepted");
    };
    if (r.data.changed && CAN_EDIT()) {
      status.append(" ", el("button", { type: "button", id: "accept-all", class: "link",
        onclick: accept("/questions/accept-all", () => [...box.querySelectorAll("tr.changed")]) }, "Accept all as baselines"));
    }
    box.replaceChildren(el("div", { class: "table-wrap" }, el("table", { id: "question-results", class: "stack" },
      el("thead", {}, el("tr", {}, el("th", {}, "Question"), el("th", {}, "Result"), el("th", {}, "Passages now"), el("th", {}, el("span", { class: "sr-only" }, "Actions")))),
      el("tbody", {}, r.data.results.map((q) => el("tr", { class: q.changed ? "changed" : "same", "data-question": q.id },
        el("td", { "data-label": "Question" }, q.question, el("div", { class: "muted small" }, `as ${q.asUser ? `user ${q.asUser}` : "nobody"}`)),
        el("td", { "data-label": "Result" }, el("span", { class: `tag ${q.changed ? "changed" : "same"}` }, q.changed ? "changed" : "same"),
          q.chunkFound === false ? el("div", { class: "small" }, "the chunk voted on is no longer found") : ""),
        el("td", { "data-label": "Passages" }, el("ol", { class: "passages-now" }, q.passages.map(passageChange))),
        el("td", {}, q.changed && CAN_EDIT() ? el("button", { type: "button", class: "link accept",
          onclick: accept(`/questions/${q.id}/accept`, (e) => [e.target.closest("tr")]) }, "Accept as baseline") : "")))))));
  });
  list();
}

// One passage of a test question's run: its label, how it differs from the baseline (a gone one is listed
// after the others, unnumbered), and what of its text appeared and went.
function passageChange(p) {
  const said = { same: "", new: "new", gone: "gone", changed: p.was && p.was !== p.citation ? `changed, was ${p.was}` : "changed" }[p.status];
  return el("li", { class: `passage ${p.status}`, value: p.n || undefined },
    p.status === "gone" ? el("del", {}, p.citation) : p.citation, said ? el("span", { class: `tag ${p.status}` }, said) : "",
    p.status === "changed" && p.diff && p.diff.every(([op]) => op === "=") ? el("div", { class: "small muted" }, "The same text: only the passages around it changed.")
    : p.diff ? el("details", { class: "diff" }, el("summary", {}, p.status === "new" ? "Its text" : p.status === "gone" ? "Its text, gone" : "What changed"),
      el("div", { class: "diff-text" }, p.diff.map(([op, text]) => op === "+" ? el("ins", {}, text) : op === "-" ? el("del", {}, text)
        : text.length > 240 ? `${text.slice(0, 100)} … ${text.slice(-100)}` : text)))
      : p.status !== "same" ? el("div", { class: "small muted" }, "(its text was not kept with this baseline: accept it to compare texts next time)") : "");
}

// Why Try it found nothing, and who it asked as: permissions when they are the cause, else the score
function noHits(kb, user, withheld) {
  const by = kb.audience === "DOCUMENT_ACL" ? "reads each document by its readers" : kb.audience === "OWNER" ? "is read by its owner alone" : "";
  if (withheld && withheld.length)
    return `Every chunk the question finds is withheld from ${user} (above): give them the documents' readers, or ask as another user.`;
  if (!user && by)
    return `Asked as ${kb.caller || "you"}, with no user named: this knowledge base ${by}, so a question with no user reads nothing of it. `
      + "Name a user above to see what they get.";
  return `Asked as ${user || kb.caller || "you"}: no chunk scored above the knowledge base's minScore. Try other words, or lower minScore in the configuration.`;
}

function initTry() {
  const kb = kbData();
  initQuestions(kb);
  const asked = new URLSearchParams(window.location.search);  // from a vote: its question and chunk
  $("#ask").addEventListener("submit", async (e) => {
    e.preventDefault();
    const out = $("#answer");
    const question = $("#question").value.trim();
    if (!question) return;
    out.replaceChildren(el("p", { class: "muted" }, "Searching…"));
    const common = { query: question, userId: $("#user").value.trim() || null, contextExpansion: $("#expansion").value || null };
    const [query, context] = await Promise.all([api("POST", kbUrl(kb.id, "/query"), { ...common, marks: true }),
      api("POST", kbUrl(kb.id, "/context"), { ...common, answer: true })]);
    if (!query.ok || !context.ok) { out.replaceChildren(el("p", { class: "error" }, problem(query.ok ? context : query))); return; }
    const results = query.data.results;
    const answer = context.data.answer;
    const withheld = query.data.withheld;  // an administrator asking as a user: what that user does not get
    const asUser = query.data.asUser;  // who that user is to this knowledge base
    out.replaceChildren(
      withheld ? el("section", { class: "card", "aria-labelledby": "withheld-h", id: "withheld" },
        el("h2", { id: "withheld-h" }, `Withheld from ${common.userId} (${withheld.length} document${withheld.length === 1 ? "" : "s"})`),
        asUser && !asUser.known ? el("p", { class: "notice unknown-user" }, `No key, grant or group names “${asUser.user}”: a misspelt name? `
          + "It is asked as a user with no groups.") : "",
        asUser ? el("p", { class: "muted principals" }, `Reads as: ${asUser.principals.join(", ") || "nobody"}`) : "",
        query.data.withheldReason ? el("p", { class: "notice" }, query.data.withheldReason) : "",
        withheld.length ? el("ul", {}, withheld.map((w) => el("li", { class: "withheld-doc" }, w.source || w.documentId,
          w.chunks > 1 ? el("span", { class: "muted" }, ` (${w.chunks} chunks)`) : "", " ",
          el("span", { class: "muted rule" }, `withheld by ${w.rule}`))))
          : el("p", { class: "muted" }, "Nothing: this user gets every chunk the question finds.")) : "",
      answer ? el("section", { class: "card", "aria-labelledby": "reply-h" }, el("h2", { id: "reply-h" }, "Answer"),
        el("p", { class: "muted", id: "reply-by" }, answer.by === "extractive"
          ? "Extractive: no language model on this server, so the context's sentences that cover the question, with their [Source n]."
          : `By ${answer.model}, from the context below.`),
        el("pre", { id: "reply" }, answer.text)) : "",
      el("section", { class: "card", "aria-labelledby": "chunks-h" }, el("h2", { id: "chunks-h" }, `Scored chunks (${results.length})`),
        el("p", { class: "muted", id: "order-rule" }, `Order: ${query.data.order}`),
        results.length ? el("ol", { class: "hits" }, results.map((h) => el("li", { class: "hit" },
          el("div", { class: "meta" }, el("b", { class: "score" }, orderingScore(h)), " · ", el("span", { class: "citation" }, h.citation || h.source)),
          el("details", { class: "ranking muted" }, el("summary", {}, "Why here"),
            `Relevance ${h.score.toFixed(4)}: what minScore keeps to`, h.rerankScore !== undefined ? ` · rerank ${Number(h.rerankScore).toFixed(4)}` : "",
            h.ranking ? el("div", {}, ranking(h.ranking)) : ""),
          el("pre", {}, h.text),
          h.metadata && h.metadata.boxes && h.metadata.document_id && !h.metadata.attachment ? onPage(kb, h.metadata.document_id, h.metadata.page, h.metadata.boxes) : "",
          h.passage && h.passage !== h.text ? el("details", { class: "passage" },
            el("summary", {}, `Passage the model sees: ${h.passageCitation} (${h.passage.length} chars, the sentences that match marked)`),
            highlighted(h.passage, h.offsets, h.matchOffsets)) : "")))
          : el("p", { class: "empty", id: "no-hits" }, noHits(kb, common.userId, withheld))),
      el("section", { class: "card", "aria-labelledby": "context-h" }, el("h2", { id: "context-h" }, "What the model sees"),
        context.data.section ? el("pre", { id: "context" }, context.data.section) : el("p", { class: "empty" }, "Nothing would be injected: no passage passed."),
        context.data.sources.length ? el("div", {}, el("h3", {}, "Cited sources: was each one right?"),
          el("ul", { class: "sources" }, context.data.sources.map((s) => el("li", {}, vote(kb, question, s), " ", s.label,
            s.hitOffsets ? el("span", { class: "muted" }, ` · matched: ${s.hitOffsets.map((h) => h.citation).join("; ")}`) : "")))) : ""),
      el("section", { class: "card", "aria-labelledby": "trace-h" }, el("h2", { id: "trace-h" }, "rag:trace"),
        el("pre", { id: "trace" }, JSON.stringify(context.data.trace, null, 2))));
    const voted = asked.get("chunk");
    if (voted && question === asked.get("q")) {
      const at = results.findIndex((h) => h.id === voted);
      const note = el("p", { class: at >= 0 ? "notice" : "error", id: "voted-chunk" }, at >= 0
        ? `The chunk voted on is result ${at + 1}, marked below.` : "The chunk voted on is not among the results now.");
      $("#chunks-h").after(note);
      if (at >= 0) { const item = $$("ol.hits > li", out)[at]; item.classList.add("focus"); item.scrollIntoView({ block: "center" }); }
    }
  });
  if (asked.get("q")) {
    $("#question").value = asked.get("q");
    $("#ask").requestSubmit();
  }
}

// ---- feedback: review a vote, note it, keep its question as a test question ---------------------------
function initFeedback() {
  for (const row of $$("tr[data-feedback]")) {
    const status = $(".review-status", row);
    const save = async (change) => {
      const r = await api("PATCH", `/ragstore/feedback/${encodeURIComponent(row.dataset.feedback)}`, change);
      status.textContent = r.ok ? "saved" : problem(r);
    };
    $(".reviewed", row)?.addEventListener("change", (e) => save({ reviewed: e.target.checked }));
    $(".note", row)?.addEventListener("change", (e) => save({ note: e.target.value }));
    $(".keep-question", row)?.addEventListener("click", async () => {
      const r = await api("POST", kbUrl(row.dataset.kb, "/questions"), { question: row.dataset.question, chunkId: row.dataset.chunk });
      status.textContent = r.ok ? "kept as a test question" : problem(r);
    });
  }
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
      turnProblems(t),
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

// What a turn's author should know first: each knowledge base's verdict, a KB that failed in the turn, an
// httpCall that failed or was blocked.
function turnProblems(t) {
  const problems = [];
  for (const entry of Object.entries(t.memory).filter(([k]) => k.startsWith("rag:trace:")).flatMap(([, v]) => v)) {
    if (entry.error) problems.push(`Knowledge base ${entry.kb} failed in this turn: ${entry.error}`);
    if (entry.warning) problems.push(`Knowledge base ${entry.kb}: ${entry.warning}`);
  }
  for (const [k, v] of Object.entries(t.memory)) {
    if (k.startsWith("rag:httpcall:trace:") && v.error) problems.push(`httpCall ${v.httpCall} gave no search results: ${v.error}`);
  }
  const ids = t.knowledgeBaseIds || {};
  const rows = Object.entries(ids).map(([name, id]) => {
    const li = el("li", { "data-kb-verdict": id }, el("a", { href: `/ui/kbs/${encodeURIComponent(id)}` }, name), " ");
    api("GET", kbUrl(id, "/verdict")).then((r) => {
      li.append(verdictBadge(el("span"), r));
      if (r.ok && r.data.status !== "ok") li.append(" ", `${r.data.detail}${r.data.fix ? ` · fix: ${r.data.fix}` : ""}`);
    });
    return li;
  });
  return el("section", { class: "card", id: "turn-problems" }, el("h2", {}, "Knowledge bases and problems"),
    rows.length ? el("ul", { class: "verdicts" }, rows) : el("p", { class: "empty" }, "No knowledge base in this agent's workflows."),
    problems.length ? el("ul", { class: "problems" }, problems.map((p) => el("li", { class: "error" }, p))) : "");
}

// ---- health: the doctor's checks for each knowledge base -------------------------------------
const LEVEL_TEXT = { ok: "ok", warning: "WARN", failed: "FAIL", skipped: "skipped" };
// What needs looking at comes first: the summary names the knowledge bases that need attention, their rows move to the
// top (failed, then warning) with their problems before their passed checks; a knowledge base whose checks all
// passed is one row ("every check (10)", the checks named under it).
function initHealth() {
  const bodies = $$("tbody[data-doctor]");
  const verdicts = new Map();
  const RANK = { failed: 0, warning: 1, ok: 2 };
  const summarize = () => {
    const attention = bodies.filter((b) => ["failed", "warning"].includes(verdicts.get(b)))
      .sort((a, b) => RANK[verdicts.get(a)] - RANK[verdicts.get(b)]);
    const table = $("#health");
    for (const b of [...attention].reverse()) table.insertBefore(b, table.tBodies[0]);  // (the header stays first)
    const left = bodies.length - verdicts.size;
    $("#health-summary").replaceChildren(attention.length
      ? `${attention.length} of ${bodies.length} knowledge base${bodies.length === 1 ? "" : "s"} need${attention.length === 1 ? "s" : ""} attention: ` +
        attention.map((b) => `${b.dataset.name} (${verdicts.get(b)}: ${b.dataset.problems})`).join("; ")
      : left ? `Checking… ${verdicts.size} of ${bodies.length} done, none needs attention so far.` : `All ${bodies.length} knowledge base${bodies.length === 1 ? "" : "s"} pass every check.`,
      left && attention.length ? ` (checking ${left} more…)` : "");
    $("#health-summary").className = attention.length ? "caution" : "muted";
  };
  for (const body of bodies) {
    api("GET", kbUrl(body.dataset.doctor, "/verdict")).then((r) => {
      const name = el("a", { href: `/ui/kbs/${encodeURIComponent(body.dataset.doctor)}` }, body.dataset.name);
      if (!r.ok) {
        body.replaceChildren(el("tr", {}, el("th", { scope: "row" }, name), el("td", { colspan: 4, class: "error" }, problem(r))));
        body.dataset.problems = problem(r); verdicts.set(body, "failed"); summarize(); return;
      }
      const checks = r.data.checks, bad = checks.filter((c) => c.level === "failed" || c.level === "warning");
      body.dataset.problems = bad.map((c) => c.check).join(", ");
      verdicts.set(body, r.data.status);
      if (!bad.length && r.data.status === "ok") {
        body.replaceChildren(el("tr", { class: "ok", "data-check": "all" },
          el("th", { scope: "row" }, name, el("br"), verdictBadge(el("span"), r)), el("td", { "data-label": "Check" }, `every check (${checks.length})`),
          el("td", { "data-label": "Status" }, el("span", { class: "health ok" }, "ok")),
          el("td", { "data-label": "Detail", colspan: 2 }, el("details", {}, el("summary", {}, `${checks.filter((c) => c.level === "ok").length} passed`),
            el("ul", {}, checks.map((c) => el("li", {}, `${c.check}: ${c.level === "skipped" ? "skipped" : c.detail}`)))))));
        summarize(); return;
      }
      const ordered = [...bad.sort((a, b) => RANK[a.level] - RANK[b.level]), ...checks.filter((c) => !bad.includes(c))];
      const head = el("th", { scope: "row", rowspan: ordered.length }, name, el("br"), verdictBadge(el("span"), r));
      body.replaceChildren(...ordered.map((c, i) => el("tr", { class: c.level, "data-check": c.check },
        i === 0 ? head : "", el("td", { "data-label": "Check" }, c.check),
        el("td", { "data-label": "Status" }, el("span", { class: `health ${LEVEL_CLASS[c.level]}` }, LEVEL_TEXT[c.level])),
        el("td", { "data-label": "Detail" }, c.detail), el("td", { "data-label": "Fix" }, c.fix || "—"))));
      summarize();
    });
  }
}

// ---- admin: API keys, the group directory with each membership's origin, the vault -----------
const words = (text) => text.split(",").map((x) => x.trim()).filter(Boolean);
function initAdmin() {
  const tenant = document.body.dataset.tenant || "default";
  const keys = async () => {
    const r = await api("GET", "/keys");
    const body = $("#keys tbody");
    if (!r.ok) { body.replaceChildren(el("tr", {}, el("td", { colspan: 7, class: "error" }, problem(r)))); return; }
    const live = r.data.filter((k) => !k.revokedOn);
    body.replaceChildren(...(live.length ? live.map((k) => el("tr", { "data-key": k.id },
      el("td", { "data-label": "Name" }, k.name || k.id), el("td", { "data-label": "Role" }, k.role), el("td", { "data-label": "User" }, k.user || "—"),
      el("td", { "data-label": "Groups" }, (k.groups || []).join(", ") || "—"), el("td", { "data-label": "Acts for users" }, k.actsForUsers ? "yes" : "no"),
      el("td", { "data-label": "Created" }, when(k.createdOn)),
      el("td", {}, el("button", { type: "button", class: "danger", onclick: async () => {
        if (!confirm(`Revoke the key ${k.name || k.id}? Whoever uses it is refused from now on.`)) return;
        const gone = await api("DELETE", `/keys/${encodeURIComponent(k.id)}`);
        $("#new-key-out").replaceChildren(el("p", { class: gone.ok ? "" : "error" }, gone.ok ? `Revoked ${k.name || k.id}.` : problem(gone)));
        keys();
      } }, "Revoke")))) : [el("tr", {}, el("td", { colspan: 7, class: "empty" }, "No keys: auth is off (every caller is trusted) until the first one exists."))]));
  };
  $("#new-key").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = e.target;
    const body = { role: f.role.value, actsForUsers: f.actsForUsers.checked, groups: words(f.groups.value) };
    if ($("#keys td.empty") && body.role !== "admin" && !confirm(`The first key turns auth on, and a ${body.role}'s key cannot manage keys: `
      + "nobody could make or revoke a key on this page after it (eddi-rag keys create on the server still can). Create it anyway?")) return;
    if (f.name.value.trim()) body.name = f.name.value.trim();
    if (f.user.value.trim()) body.user = f.user.value.trim();
    const r = await api("POST", "/keys", body);
    const out = $("#new-key-out");
    if (!r.ok) { out.replaceChildren(el("p", { class: "error" }, `Not created: ${problem(r)}`)); return; }
    // the first key turns auth on: this page, too, asks who you are from now on; an admin's key signs in from here
    const first = $("#keys td.empty");
    const signIn = el("form", { method: "post", action: "/ui/login", class: "inline-form" },
      el("input", { type: "hidden", name: "credential", value: r.data.key }), el("input", { type: "hidden", name: "next", value: "/ui/admin" }),
      el("button", { type: "submit", id: "sign-in-with-key" }, "Sign in with this key"));
    out.replaceChildren(el("p", {}, "The key, shown this once (copy it now): ", el("code", { class: "secret-once" }, r.data.key)),
      first ? el("p", { class: "caution" }, "Auth is on from now: every caller, this page too, gives a key. ",
        body.role === "admin" ? signIn : el("a", { href: "/ui/login?next=/ui/admin" }, "Sign in with an administrator's key")) : "");
    if (first) { const who = $(".who span"); if (who) { who.textContent = "auth on · not signed in"; who.title = "A key exists: sign in with one"; }
      const note = $("#first-key-note"); if (note) note.remove(); }
    f.reset();
    if (!first) keys();
  });
  const groups = async () => {
    const r = await api("GET", "/ragstore/group-memberships");
    const body = $("#groups tbody");
    if (!r.ok) { body.replaceChildren(el("tr", {}, el("td", { colspan: 4, class: "error" }, problem(r)))); return; }
    body.replaceChildren(...(r.data.length ? r.data.map((m) => el("tr", { "data-user": m.user },
      el("td", { "data-label": "User" }, m.user), el("td", { "data-label": "Group" }, m.group),
      el("td", { "data-label": "From" }, m.origin ? `permission sync of ${m.origin.replace(/^source:/, "")}` : "set here"),
      el("td", { "data-label": "Since" }, when(m.addedOn)))) : [el("tr", {}, el("td", { colspan: 4, class: "empty" }, "No memberships yet."))]));
  };
  $("#set-groups").addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = e.target;
    const r = await api("PUT", `/ragstore/groups/${encodeURIComponent(f.user.value.trim())}`, { groups: words(f.groups.value) });
    $("#set-groups-out").replaceChildren(el("p", { class: r.ok ? "" : "error" }, r.ok ? `${r.data.user} is now in: ${r.data.groups.join(", ") || "no group"}.` : `Not saved: ${problem(r)}`));
    groups();
  });
  const secrets = async () => {
    const body = $("#secrets tbody");
    if (!body) return;
    const r = await api("GET", `/secretstore/secrets/${encodeURIComponent(tenant)}`);
    if (!r.ok) { body.replaceChildren(el("tr", {}, el("td", { colspan: 5, class: "error" }, problem(r)))); return; }
    body.replaceChildren(...(r.data.length ? r.data.map((k) => el("tr", {}, el("td", { "data-label": "Key" }, el("code", {}, `\${vault:${k.keyName}}`)),
      el("td", { "data-label": "Description" }, k.description || "—"), el("td", { "data-label": "Created" }, when(k.createdAt)),
      el("td", { "data-label": "Last used" }, k.lastAccessedAt ? when(k.lastAccessedAt) : "never"),
      el("td", { "data-label": "Rotated" }, k.lastRotatedAt ? when(k.lastRotatedAt) : "—"), secretActions(k))) : [el("tr", {}, el("td", { colspan: 6, class: "empty" }, "No secrets stored yet."))]));
  };
  // a secret's value replaced (its references keep working, with the new value) or the secret deleted
  const secretUrl = (k) => `/secretstore/secrets/${encodeURIComponent(tenant)}/${encodeURIComponent(k.keyName)}`;
  const vaultSaid = (ok, text) => $("#vault-out").replaceChildren(el("p", { class: ok ? "" : "error" }, text));
  const secretActions = (k) => {
    const value = el("input", { type: "password", autocomplete: "off", "aria-label": `New value of ${k.keyName}` });
    return el("td", { class: "actions", "data-key-name": k.keyName },
      el("details", { class: "replace-secret" }, el("summary", {}, "Replace value…"), value,
        el("button", { type: "button", onclick: async () => {
          if (!value.value) { vaultSaid(false, `Type the new value of ${k.keyName} first.`); return; }
          const r = await api("PUT", secretUrl(k), { value: value.value, description: k.description || undefined, allowedAgents: k.allowedAgents });
          value.value = "";
          vaultSaid(r.ok, r.ok ? `Replaced the value of \${vault:${k.keyName}}: whatever refers to it uses the new value now.` : problem(r));
          if (r.ok) secrets();
        } }, "Replace")),
      el("button", { type: "button", class: "danger", onclick: async () => {
        if (!confirm(`Delete the secret ${k.keyName}? Every configuration that refers to \${vault:${k.keyName}} fails until it is stored again.`)) return;
        const r = await api("DELETE", secretUrl(k));
        vaultSaid(r.ok, r.ok ? `Deleted ${k.keyName}.` : problem(r));
        if (r.ok) secrets();
      } }, "Delete"));
  };
  if ($("#rotate-dek")) $("#rotate-dek").addEventListener("click", async () => {
    if (!confirm("Encrypt every secret of this tenant again with a new data key?")) return;
    const r = await api("POST", `/secretstore/secrets/${encodeURIComponent(tenant)}/rotate-dek`);
    vaultSaid(r.ok, r.ok ? (r.data.message || `Rotated: ${r.data.secretsReEncrypted} secret(s) encrypted again.`) : problem(r));
    if (r.ok) secrets();
  });
  keys(); groups(); secrets();
}

// ---- audit: the record filtered as an auditor asks, exported, verified; what is kept (administrators) ----
function initAudit() {
  let after = 0, query = "";
  const cell = (label, ...content) => el("td", { "data-label": label }, ...content);
  const about = (e) => {
    const d = e.detail || {};
    if (e.action === "retrieval") return [`read as ${d.reader || "nobody"}`, d.kb ? ` from ${d.kb}` : "", d.agent ? ` for agent ${d.agent}` : "",
      d.withheld ? `; ${d.withheld} withheld` : "", d.refused ? `; refused: ${d.refused}` : ""].join("");
    if (e.action === "answer") return `${(d.citations || []).length} citation(s) of entries ${(d.retrievals || []).join(", ")}`;
    return [e.subject || "", Object.keys(d).length ? ` ${JSON.stringify(d)}` : ""].join("");
  };
  const who = (w) => [w.user, w.key, w.role].filter(Boolean).join(" · ") || "—";
  const row = (e) => el("tr", { "data-seq": e.seq }, cell("#", String(e.seq)), cell("When", when(e.at)), cell("Action", e.action),
    cell("Face", e.face), cell("Who", who(e.who || {})), cell("About", about(e)),
    cell("Documents", ((e.detail || {}).documents || []).map((d) => d.document).join(", ") || "—"),
    cell("Query", (e.detail || {}).query ?? ((e.detail || {}).queryErasedOn ? "(erased)" : "—")));
  const show = async (more) => {
    const r = await api("GET", `/audit?${query}&after=${after}&limit=100`);
    const body = $("#audit-entries tbody");
    if (!r.ok) { body.replaceChildren(el("tr", {}, el("td", { colspan: 8, class: "error" }, problem(r)))); return; }
    const rows = r.data.map(row);
    if (more) body.append(...rows);
    else body.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 8, class: "empty" }, "No entries match."))]));
    if (r.data.length) after = r.data[r.data.length - 1].seq;
    $("#audit-more").hidden = r.data.length < 100;
  };
  $("#audit-filter").addEventListener("submit", (e) => {
    e.preventDefault();
    const params = new URLSearchParams();
    for (const [name, value] of new FormData(e.target)) if (String(value).trim()) params.set(name, String(value).trim());
    query = params.toString();
    after = 0;
    $("#export-jsonl").href = `/audit?${query}&format=jsonl&limit=10000`;
    $("#export-csv").href = `/audit?${query}&format=csv&limit=10000`;
    show(false);
  });
  $("#audit-more").addEventListener("click", () => show(true));
  $("#verify").addEventListener("click", async () => {
    const r = await api("GET", "/audit/verify");
    const out = $("#verify-out");
    if (!r.ok) { out.replaceChildren(el("p", { class: "error" }, problem(r))); return; }
    out.replaceChildren(r.data.ok ? el("p", {}, el("span", { class: "health ok" }, "whole"), ` ${r.data.entries} entries: the chain holds.`)
      : el("div", {}, el("p", {}, el("span", { class: "health bad" }, "broken"), ` ${r.data.problems.length} problem(s) in ${r.data.entries} entries:`),
        el("ul", {}, r.data.problems.map((p) => el("li", {}, `entry ${p.seq}: ${p.problem}`)))));
  });
  const settings = $("#audit-settings");
  if (settings) {
    api("GET", "/audit/settings").then((r) => {
      if (!r.ok) return;
      settings.auditRetentionDays.value = r.data.auditRetentionDays ?? "";
      settings.auditRetentionDays.placeholder = `the server's default: ${r.data.effective.auditRetentionDays}`;
      settings.auditQueries.value = r.data.auditQueries ?? "";
    });
    settings.addEventListener("submit", async (e) => {
      e.preventDefault();
      const days = settings.auditRetentionDays.value.trim();
      const r = await api("PUT", "/audit/settings", { auditRetentionDays: days ? Number(days) : null, auditQueries: settings.auditQueries.value || null });
      $("#audit-settings-out").replaceChildren(el("p", { class: r.ok ? "" : "error" }, r.ok
        ? `Saved: entries are kept ${r.data.effective.auditRetentionDays} days, queries ${r.data.effective.auditQueries === "full" ? "in full" : r.data.effective.auditQueries === "digest" ? "as a digest" : "not at all"}.`
        : `Not saved: ${problem(r)}`));
    });
    $("#audit-erase").addEventListener("submit", async (e) => {
      e.preventDefault();
      const user = e.target.user.value.trim();
      if (!confirm(`Erase every query ${user} asked from the record? This cannot be undone.`)) return;
      const r = await api("POST", `/audit/erase?user=${encodeURIComponent(user)}`);
      $("#audit-erase-out").replaceChildren(el("p", { class: r.ok ? "" : "error" }, r.ok ? `Erased ${r.data.erased} quer${r.data.erased === 1 ? "y" : "ies"} of ${user}.` : `Not erased: ${problem(r)}`));
    });
  }
  show(false);
}

// Text that scrolls (a passage, an answer, a diff) is reachable by keyboard, as axe's scrollable-region-focusable asks:
// each such region takes focus, whenever a page puts one in.
const SCROLLING = "pre:not([tabindex]), .diff-text:not([tabindex]), .table-wrap:not([tabindex])";
function focusableScrolling() {
  for (const node of $$(SCROLLING)) node.tabIndex = 0;
  for (const wrap of $$(".table-wrap")) {  // a table wider than the screen says it scrolls (a phone cut it silently)
    const wider = wrap.scrollWidth > wrap.clientWidth + 2;
    if (wider !== wrap.classList.contains("scrolls")) wrap.classList.toggle("scrolls", wider);
  }
}
window.addEventListener("resize", () => focusableScrolling());

document.addEventListener("DOMContentLoaded", () => {
  focusableScrolling();
  new MutationObserver(focusableScrolling).observe(document.body, {childList: true, subtree: true});
  if ($("table.kbs tr[data-kb]")) loadListHealth();
  if ($("#create-kb")) initCreate();
  if ($("#editor")) initEditor();
  if ($("#ingestions")) initDocuments();
  if ($("#ask")) initTry();
  if ($("#doc-chunks")) initDocument();
  if ($("#feedback")) initFeedback();
  initAgents();
  if ($("tbody[data-doctor]")) initHealth();
  if ($("#admin-keys")) initAdmin();
  if ($("#audit-entries")) initAudit();
});
