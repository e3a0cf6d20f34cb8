// The assistant's page: plain DOM and fetch, no framework. Every /api call carries the bearer
// token when the server wants one (entered in the page, or given as #token=... in the address).
"use strict";

const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("cbl-token") || "";

function readHashToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    token = decodeURIComponent(m[1]);
    sessionStorage.setItem("cbl-token", token);
    history.replaceState(null, "", location.pathname); // keep it out of the address bar
  }
}

async function api(path, opts = {}) {
  opts.headers = Object.assign({}, opts.headers, token ? { Authorization: "Bearer " + token } : {});
  const res = await fetch(path, opts);
  if (res.status === 401) $("tokenbar").hidden = false;
  return res;
}

async function apiJSON(path, opts) {
  const res = await api(path, opts);
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error || res.status + " " + res.statusText);
  return body;
}

function showError(err) {
  $("error").textContent = err ? String(err.message || err) : "";
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c);
  return e;
}

function fmtBytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1 << 20) return (n / 1024).toFixed(1) + " KiB";
  return (n / (1 << 20)).toFixed(1) + " MiB";
}

// ---- documents ----

async function loadDocs() {
  const { documents } = await apiJSON("/api/documents");
  const list = $("docs");
  list.replaceChildren();
  const collections = new Set();
  for (const d of documents) {
    if (d.collection) collections.add(d.collection);
    const del = el("button", { class: "del", title: "remove " + d.uri, textContent: "✕" });
    del.onclick = () => removeDoc(d.uri).catch(showError);
    list.append(el("li", { class: "doc", "data-uri": d.uri, title: d.uri },
      el("span", { class: "name", textContent: d.name }),
      el("span", { class: "meta", textContent:
        [d.kind, d.collection && "in " + d.collection, d.chunks + " chunks", fmtBytes(d.bytes)]
          .filter(Boolean).join(" · ") }),
      del));
  }
  if (!documents.length) list.append(el("li", { class: "empty", textContent: "No documents yet." }));
  const sel = $("ask-collection");
  const current = sel.value;
  sel.replaceChildren(el("option", { value: "", textContent: "all collections" }));
  for (const c of [...collections].sort()) sel.append(el("option", { value: c, textContent: c }));
  sel.value = collections.has(current) ? current : "";
}

async function removeDoc(uri) {
  await apiJSON("/api/documents?uri=" + encodeURIComponent(uri), { method: "DELETE" });
  await loadDocs();
}

async function upload(ev) {
  ev.preventDefault();
  showError(null);
  const files = $("files").files;
  if (!files.length) return showError("Choose files first.");
  const form = new FormData();
  form.append("collection", $("upload-collection").value.trim());
  for (const f of files) form.append("file", f, f.name);
  const { job } = await apiJSON("/api/documents", { method: "POST", body: form });
  $("files").value = "";
  await watchJob(job.id);
}

async function ingestFolder() {
  showError(null);
  const { job } = await apiJSON("/api/folder", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ collection: $("upload-collection").value.trim() }),
  });
  await watchJob(job.id);
}

// watchJob polls an ingest job until it ends, showing its progress, then reloads the list.
async function watchJob(id) {
  const box = el("div", { class: "job" });
  $("jobs").prepend(box);
  for (;;) {
    const { jobs } = await apiJSON("/api/jobs?id=" + id);
    const j = jobs[0];
    box.textContent = jobLine(j);
    if (j.state === "done" || j.state === "failed") {
      for (const s of j.skipped || []) box.append(el("div", { class: "skip", textContent: "skipped " + s.file + ": " + s.reason }));
      box.classList.add(j.state);
      break;
    }
    await new Promise((r) => setTimeout(r, 400));
  }
  await loadDocs();
}

function jobLine(j) {
  const name = (p) => p.split("/").pop();
  const what = j.paths.map(name).join(", ");
  if (j.state === "queued") return "Queued: " + what;
  if (j.state === "running") {
    const pct = j.total ? " " + Math.round((100 * j.done) / j.total) + "%" : "";
    return "Ingesting " + what + ": " + (j.phase || "") + pct + (j.current ? " (" + name(j.current) + ")" : "");
  }
  if (j.state === "failed") return "Failed: " + what + ": " + j.error;
  const r = j.report;
  return "Ingested " + what + ": " + r.added + " added, " + r.updated + " updated, " +
    r.unchanged + " unchanged, " + r.skipped + " skipped";
}

// ---- asking ----

// readEvents parses a text/event-stream response body, calling on(event, data) per event.
async function readEvents(res, on) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      on(event, data ? JSON.parse(data) : null);
    }
  }
}

async function ask(ev) {
  ev.preventDefault();
  showError(null);
  const question = $("question").value.trim();
  if (!question) return;
  $("ask-btn").disabled = true;
  $("answer-box").hidden = false;
  $("answer").textContent = "";
  $("answer").classList.add("streaming");
  $("stats").textContent = "";
  $("citations").replaceChildren();
  try {
    const res = await api("/api/ask", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ question, k: Number($("k").value) || 0, stream: true,
        collection: $("ask-collection").value, compare_full: $("compare").checked }),
    });
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      throw new Error(body.error || res.status + " " + res.statusText);
    }
    await readEvents(res, (event, data) => {
      if (event === "token") $("answer").textContent += data.text;
      else if (event === "citations") showCitations(data);
      else if (event === "stats") showStats(data);
      else if (event === "error") showError(data.error);
    });
  } catch (err) {
    showError(err);
  } finally {
    $("answer").classList.remove("streaming");
    $("ask-btn").disabled = false;
  }
}

function showCitations(cites) {
  const list = $("citations");
  cites.forEach((c, i) => {
    const where = [c.page ? "page " + c.page : "", c.heading ? "§ " + c.heading : "",
      "bytes " + c.start + "–" + c.end].filter(Boolean).join(", ");
    const passage = el("blockquote", { class: "passage", hidden: true, textContent: c.text });
    const head = el("button", { class: "cite-head", title: c.uri,
      textContent: "[" + (i + 1) + "] " + c.name + " — " + where });
    head.onclick = () => { passage.hidden = !passage.hidden; };
    const li = el("li", { class: "citation", "data-uri": c.uri, "data-page": String(c.page || 0) }, head);
    if (c.file) {
      const open = el("button", { class: "open", textContent: "open original" });
      open.onclick = () => openFile(c.file, c.page).catch(showError);
      li.append(" ", open);
    }
    li.append(passage);
    list.append(li);
  });
}

// openFile fetches an uploaded original with the token and opens it (at its page for a PDF).
async function openFile(path, page) {
  const res = await api(path);
  if (!res.ok) throw new Error("cannot open: " + res.status);
  const url = URL.createObjectURL(await res.blob());
  window.open(url + (page ? "#page=" + page : ""), "_blank", "noopener");
}

function showStats(s) {
  const ms = (v) => v.toFixed(0) + " ms";
  let line = "TTFT " + ms(s.ttft_ms) + " (" + s.mode + ")";
  if (s.full_ttft_ms) {
    line += " vs full prefill " + ms(s.full_ttft_ms);
    // Blending pays off once chunks' KV is stored: the first answer over new chunks stores it.
    line += s.tokens_reused > 0 ? " — " + (s.full_ttft_ms / s.ttft_ms).toFixed(1) + "× faster"
      : " — no stored KV yet (ask again to reuse it)";
  }
  line += " · " + s.prompt_tokens + " prompt tokens, " + s.tokens_reused + " reused, " +
    s.tokens_recomputed + " recomputed · " + s.generated_tokens + " tokens at " +
    s.decode_tokens_per_s.toFixed(1) + "/s · " + s.search_mode + " retrieval";
  $("stats").textContent = line;
}

// ---- start ----

async function start() {
  readHashToken();
  $("upload").onsubmit = (e) => upload(e).catch(showError);
  $("ask").onsubmit = (e) => ask(e);
  $("folder-btn").onclick = () => ingestFolder().catch(showError);
  $("token-save").onclick = () => {
    token = $("token").value;
    sessionStorage.setItem("cbl-token", token);
    $("tokenbar").hidden = true;
    start().catch(showError);
  };
  $("question").onkeydown = (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("ask").requestSubmit(); }
  };
  const info = await apiJSON("/api/info");
  $("version").textContent = "libcacheblend " + info.version;
  if (info.docs_dir) {
    $("folder").hidden = false;
    $("folder-path").textContent = info.docs_dir;
  }
  await loadDocs();
}

start().catch(showError);
