// ringcap serve's page: the search form, the flows table and the packets, over the JSON
// endpoints of the same server (crates/ringcap/src/serve_cmd/web.rs). Hand-written, no library.
// Everything that comes from the store (packet bytes, addresses, file names) or from the user
// (expressions, libpcap quoting them back) reaches the page through textContent only.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// A POST of JSON (which a page of another site cannot send here: see web.rs).
function post(path, body) {
  return fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    credentials: "same-origin",
    cache: "no-store",
  });
}

function form() {
  return { query: $("query").value, after: $("after").value, before: $("before").value,
           name: $("name").value };
}

function setStatus(text) {
  $("status").textContent = text;
}

// ---- checking as the expression is typed ----

let checkTimer = null;
let checkSeq = 0;

function showProblem(problem) {
  const qerr = $("query-error");
  const terr = $("time-error");
  qerr.replaceChildren();
  terr.replaceChildren();
  $("name-error").replaceChildren();
  for (const id of ["query", "after", "before", "name"]) $(id).removeAttribute("aria-invalid");
  if (!problem) return;
  const field = problem.field || "query";
  $(field).setAttribute("aria-invalid", "true");
  const box = field === "query" ? qerr : field === "name" ? $("name-error") : terr;
  box.append(el("span", problem.error, "message"));
  const text = $(field).value;
  if (problem.at && field === "query") {
    // The expression again, with the part the error is about marked.
    const [s, e] = problem.at;
    const shown = el("span", null, "where");
    shown.append(document.createTextNode(text.slice(0, s)));
    shown.append(el("mark", text.slice(s, e) || " "));
    shown.append(document.createTextNode(text.slice(e)));
    box.append(shown);
  }
}

async function check() {
  const seq = ++checkSeq;
  $("check").textContent = "…";
  $("check").className = "check";
  try {
    const res = await post("/api/check", form());
    const answer = await res.json();
    if (seq !== checkSeq) return;
    if (res.ok && answer.ok) {
      showProblem(null);
      $("check").textContent = "✓";
      $("check").className = "check ok";
    } else if (res.ok) {
      showProblem(answer.problem);
      $("check").textContent = "✗";
      $("check").className = "check bad";
    } else {
      $("check").textContent = "";
      setStatus(answer.error || "the check failed");
    }
  } catch (e) {
    if (seq === checkSeq) $("check").textContent = "";
  }
}

function checkSoon() {
  clearTimeout(checkTimer);
  checkTimer = setTimeout(check, 250);
}

// ---- packets ----

let packetsAbort = null;
const packetData = [];

function hexdump(hex) {
  // tcpdump -X's layout: offset, 16 bytes in groups of two, the printable characters.
  const lines = [];
  const n = hex.length / 2;
  for (let off = 0; off < n; off += 16) {
    let h = "";
    let a = "";
    for (let i = off; i < Math.min(off + 16, n); i++) {
      const b = parseInt(hex.substr(i * 2, 2), 16);
      h += hex.substr(i * 2, 2);
      if ((i - off) % 2 === 1) h += " ";
      a += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".";
    }
    lines.push("0x" + off.toString(16).padStart(4, "0") + ":  " + h.padEnd(40, " ") + " " + a);
  }
  return lines.join("\n");
}

function selectPacket(li) {
  for (const other of $("packets").querySelectorAll("li[aria-selected=true]")) {
    other.setAttribute("aria-selected", "false");
  }
  li.setAttribute("aria-selected", "true");
  const p = packetData[Number(li.dataset.i)];
  $("hex-title").textContent =
    "of packet " + p.n + ": " + p.captured + " bytes captured, " + p.wire_len + " on the wire" +
    (p.hex.length / 2 < p.captured ? " (the first " + p.hex.length / 2 + " shown)" : "");
  $("hex").textContent = hexdump(p.hex);
}

function addPacket(p) {
  const li = el("li", null, "packet");
  li.tabIndex = 0;
  li.dataset.i = String(packetData.length);
  li.setAttribute("aria-selected", "false");
  li.append(el("span", p.n, "n"), el("span", p.line, "line"));
  packetData.push(p);
  $("packets").append(li);
  if (packetData.length === 1) selectPacket(li);
}

async function runPackets() {
  if (packetsAbort) packetsAbort.abort();
  packetsAbort = new AbortController();
  const signal = packetsAbort.signal;
  packetData.length = 0;
  $("packets").replaceChildren();
  $("hex").textContent = "";
  $("hex-title").textContent = "";
  $("packets-error").textContent = "";
  $("packets-info").textContent = "searching…";
  const started = performance.now();
  const body = form();
  body.limit = Number($("limit").value);
  let res;
  try {
    res = await fetch("/api/packets", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal,
      cache: "no-store",
    });
  } catch (e) {
    if (!signal.aborted) $("packets-info").textContent = "the server could not be reached";
    return;
  }
  if (!res.ok) {
    let answer = {};
    try { answer = await res.json(); } catch (e) { /* not JSON */ }
    $("packets-info").textContent = "";
    if (answer.problem) showProblem(answer.problem);
    $("packets-error").textContent = answer.error || "HTTP " + res.status;
    return;
  }
  showProblem(null);
  $("check").textContent = "✓";
  $("check").className = "check ok";
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let end = null;
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      break;
    }
    if (chunk.done) break;
    buf += decoder.decode(chunk.value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const m = JSON.parse(line);
      if (m.kind === "packet") {
        addPacket(m);
        if (m.n === 1) {
          document.body.dataset.firstPacketMs = String(performance.now() - started);
        }
      } else if (m.kind === "end") {
        end = m;
      }
    }
  }
  if (signal.aborted) return;
  if (!end) {
    $("packets-info").textContent = packetData.length + " packets; the answer was cut";
    return;
  }
  let info = end.packets + (end.packets === 1 ? " packet" : " packets") + " in " + end.ms.toFixed(0) + " ms";
  if (end.more) info += "; more match: Download PCAP gives them all";
  $("packets-info").textContent = info;
  if (end.error) $("packets-error").textContent = end.error;
  document.body.dataset.packetsDone = "1";
}

// Keyboard: arrows move between packets, Enter or Space shows one's bytes.
function packetKeys(e) {
  const li = e.target.closest("li.packet");
  if (!li) return;
  if (e.key === "Enter" || e.key === " ") {
    selectPacket(li);
    e.preventDefault();
  } else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    const next = e.key === "ArrowDown" ? li.nextElementSibling : li.previousElementSibling;
    if (next) {
      next.focus();
      selectPacket(next);
    }
    e.preventDefault();
  }
}

// ---- flows ----

const COLUMNS = [
  ["src", "Source", "text"],
  ["src_port", "Port", "num"],
  ["dst", "Destination", "text"],
  ["dst_port", "Port", "num"],
  ["proto", "Proto", "text"],
  ["vlan", "VLAN", "num"],
  ["tunnel", "Tunnel", "text"],
  ["first", "First seen (UTC)", "time"],
  ["last", "Last seen (UTC)", "time"],
  ["packets", "Packets", "num"],
  ["bytes", "Bytes", "num"],
  ["files", "Files", "num"],
];
const PAGE = 25;
const flowState = { sort: "bytes", desc: true, offset: 0, filters: {}, total: 0 };
let flowTimer = null;
let flowSeq = 0;

function buildFlowHead() {
  const heads = $("flow-heads");
  const filters = $("flow-filters");
  for (const [key, label, kind] of COLUMNS) {
    const th = el("th");
    th.dataset.col = key;
    th.scope = "col";
    if (kind === "num") th.className = "num";
    const b = el("button", label, "sort");
    b.type = "button";
    b.addEventListener("click", () => {
      if (flowState.sort === key) flowState.desc = !flowState.desc;
      else {
        flowState.sort = key;
        flowState.desc = kind === "num";
      }
      flowState.offset = 0;
      loadFlows();
    });
    th.append(b);
    heads.append(th);
    const fh = el("th");
    if (kind !== "time") {
      const input = el("input");
      input.type = "text";
      input.dataset.col = key;
      input.setAttribute("aria-label", "Filter " + label + (kind === "num" ? " (N, >N, <N, N-M)" : ""));
      input.placeholder = kind === "num" ? ">0" : "filter";
      input.addEventListener("input", () => {
        flowState.filters[key] = input.value;
        flowState.offset = 0;
        clearTimeout(flowTimer);
        flowTimer = setTimeout(loadFlows, 300);
      });
      // Enter in a column filter filters now; it does not run the search.
      input.addEventListener("keydown", (e) => {
        if (e.key === "Enter") {
          e.preventDefault();
          clearTimeout(flowTimer);
          loadFlows();
        }
      });
      fh.append(input);
    }
    filters.append(fh);
  }
}

function cell(row, key) {
  const v = row[key === "proto" ? "proto" : key];
  if (key === "tunnel" && row.tunnel) return row.tunnel + (row.tunnel_id !== null ? " " + row.tunnel_id : "");
  if (v === null || v === undefined) return "";
  if (key === "bytes" || key === "packets") return Number(v).toLocaleString("en-US");
  return v;
}

function openFlow(row, tr) {
  if (!row.open) return;
  for (const other of $("flows").querySelectorAll("tbody tr.opened")) {
    other.classList.remove("opened");
    other.removeAttribute("aria-current");
  }
  tr.classList.add("opened");
  tr.setAttribute("aria-current", "true");
  $("query").value = row.open.query;
  $("after").value = row.open.after;
  $("before").value = row.open.before;
  checkSoon();
  runPackets();
  $("packets-section").scrollIntoView({ block: "start" });
}

async function loadFlows() {
  const seq = ++flowSeq;
  const f = form();
  const body = {
    after: f.after,
    before: f.before,
    sort: flowState.sort,
    desc: flowState.desc,
    offset: flowState.offset,
    limit: PAGE,
    filters: flowState.filters,
  };
  flowState.after = f.after;
  flowState.before = f.before;
  $("flows-info").textContent = "loading…";
  let res, answer;
  try {
    res = await post("/api/flows", body);
    answer = await res.json();
  } catch (e) {
    if (seq === flowSeq) $("flows-info").textContent = "the server could not be reached";
    return;
  }
  if (seq !== flowSeq) return;
  for (const th of $("flow-heads").children) {
    const sorted = th.dataset.col === flowState.sort;
    th.setAttribute("aria-sort", sorted ? (flowState.desc ? "descending" : "ascending") : "none");
  }
  for (const input of $("flow-filters").querySelectorAll("input")) input.removeAttribute("aria-invalid");
  if (!res.ok) {
    $("flows-info").textContent = answer.error || "HTTP " + res.status;
    if (answer.column) {
      const bad = $("flow-filters").querySelector('input[data-col="' + answer.column + '"]');
      if (bad) bad.setAttribute("aria-invalid", "true");
    }
    return;
  }
  flowState.total = answer.total;
  const tbody = $("flows").tBodies[0];
  tbody.replaceChildren();
  for (const row of answer.rows) {
    const tr = el("tr");
    if (row.open) {
      tr.tabIndex = 0;
      tr.className = "openable";
      tr.title = "Open this flow's packets";
      tr.addEventListener("click", () => openFlow(row, tr));
      tr.addEventListener("keydown", (e) => {
        if (e.key === "Enter") {
          e.preventDefault();
          openFlow(row, tr);
        }
      });
    }
    for (const [key, , kind] of COLUMNS) {
      const td = el("td", cell(row, key));
      if (kind === "num") td.className = "num";
      if (key === "files") td.title = row.file;
      tr.append(td);
    }
    tbody.append(tr);
  }
  if (answer.rows.length === 0) {
    const tr = el("tr");
    const td = el("td", "No flow in the window (flow tables are written with each file's index).", "empty");
    td.colSpan = COLUMNS.length;
    tr.append(td);
    tbody.append(tr);
  }
  let info = answer.total.toLocaleString("en-US") + " flows from " + answer.files + " files";
  if (answer.without_table) info += " (" + answer.without_table + " without a flow table)";
  if (answer.cut) info += "; cut at the row limit";
  $("flows-info").textContent = info;
  const first = answer.total ? answer.offset + 1 : 0;
  const last = answer.offset + answer.rows.length;
  $("page-info").textContent = first + "–" + last + " of " + answer.total.toLocaleString("en-US");
  $("prev").disabled = answer.offset === 0;
  $("next").disabled = last >= answer.total;
  document.body.dataset.flowsLoaded = String(Number(document.body.dataset.flowsLoaded || 0) + 1);
}

// ---- wiring ----

function init() {
  buildFlowHead();
  for (const id of ["query", "after", "before", "name"]) $(id).addEventListener("input", checkSoon);
  for (const b of document.querySelectorAll(".presets button")) {
    b.addEventListener("click", () => {
      $("after").value = b.dataset.after;
      $("before").value = "";
      checkSoon();
      flowState.offset = 0;
      loadFlows();
    });
  }
  $("search").addEventListener("submit", (e) => {
    // Download PCAP posts the form itself (a download, streamed by the browser to disk).
    if (e.submitter && e.submitter.id.startsWith("download")) return;
    e.preventDefault();
    // The packets' answer checks the query itself (and says where it is wrong); the flows are
    // fetched again only when the window changed. Nothing else competes with the first packet.
    clearTimeout(checkTimer);
    checkSeq++;
    runPackets();
    const f = form();
    if (f.after !== flowState.after || f.before !== flowState.before) {
      flowState.offset = 0;
      loadFlows();
    }
  });
  $("packets").addEventListener("click", (e) => {
    const li = e.target.closest("li.packet");
    if (li) selectPacket(li);
  });
  $("packets").addEventListener("keydown", packetKeys);
  $("prev").addEventListener("click", () => {
    flowState.offset = Math.max(0, flowState.offset - PAGE);
    loadFlows();
  });
  $("next").addEventListener("click", () => {
    flowState.offset += PAGE;
    loadFlows();
  });
  loadFlows();
  $("query").focus();
}

document.addEventListener("DOMContentLoaded", init);
