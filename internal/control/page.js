// The control page's script: polls /control/api/state and draws the
// panels; the plots are SVG polylines, one point per minute or per day.
"use strict";
(function () {
  const colors = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];
  const $ = (sel, root) => (root || document).querySelector(sel);
  const el = (tag, attrs, text) => {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = String(text);
    return e;
  };
  const svgEl = (tag, attrs) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  };

  function table(columns, rows, empty) {
    if (!rows || rows.length === 0) return el("p", { class: "empty" }, empty || "none");
    const t = el("table");
    const head = el("tr");
    columns.forEach((c) => head.appendChild(el("th", {}, c)));
    t.appendChild(head);
    rows.forEach((r) => {
      const tr = el("tr");
      r.forEach((v) => tr.appendChild(el("td", typeof v === "number" ? { class: "num" } : {}, v === null || v === undefined ? "" : v)));
      t.appendChild(tr);
    });
    return t;
  }

  // plot draws series (name -> values, one per label) as polylines.
  function plot(id, labels, series) {
    const W = 600, H = 160, L = 44, B = 18, T = 6;
    const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, "data-plot": id, preserveAspectRatio: "none" });
    let max = 0;
    for (const name in series) for (const v of series[name]) max = Math.max(max, v);
    const top = max > 0 ? max : 1;
    const x = (i) => L + (labels.length > 1 ? (i * (W - L - 4)) / (labels.length - 1) : 0);
    const y = (v) => H - B - ((H - B - T) * v) / top;
    svg.appendChild(svgEl("line", { x1: L, y1: H - B, x2: W, y2: H - B, stroke: "#bbb" }));
    svg.appendChild(svgEl("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#bbb" }));
    const tmax = svgEl("text", { x: 2, y: T + 8 }); tmax.textContent = String(Math.round(top * 10) / 10); svg.appendChild(tmax);
    const t0 = svgEl("text", { x: 2, y: H - B }); t0.textContent = "0"; svg.appendChild(t0);
    const first = svgEl("text", { x: L, y: H - 4 }); first.textContent = labels[0] || ""; svg.appendChild(first);
    const last = svgEl("text", { x: W - 60, y: H - 4 }); last.textContent = labels[labels.length - 1] || ""; svg.appendChild(last);
    const legend = el("div", { class: "legend" });
    Object.keys(series).forEach((name, k) => {
      const c = colors[k % colors.length];
      const pts = series[name].map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
      svg.appendChild(svgEl("polyline", { points: pts, fill: "none", stroke: c, "stroke-width": 1.5, "data-series": name, "data-values": series[name].join(",") }));
      const s = el("span"); s.appendChild(el("i", { style: `background:${c}` })); s.appendChild(document.createTextNode(name));
      legend.appendChild(s);
    });
    const wrap = el("div");
    wrap.appendChild(svg);
    wrap.appendChild(legend);
    return wrap;
  }

  function byDay(days, entries) {
    const series = {};
    for (const e of entries || []) {
      const i = days.indexOf(e.day);
      if (i < 0) continue;
      if (!series[e.key]) series[e.key] = days.map(() => 0);
      series[e.key][i] += e.input + e.output;
    }
    return series;
  }

  function fill(name, node) {
    const body = $(`[data-panel="${name}"] .body`);
    body.replaceChildren(node);
  }

  function render(st) {
    $("#title").textContent = `${st.server} control`;
    $("#now").textContent = new Date(st.now).toLocaleString();
    fill("inflight", table(["kind", "what", "started", "seconds"],
      st.in_flight.map((r) => [r.kind, r.what, new Date(r.started).toLocaleTimeString(), r.seconds]), "nothing running"));
    fill("errors", table(["time", "where", "error"],
      (st.errors || []).map((e) => [new Date(e.time).toLocaleTimeString(), e.where, e.message]), "no errors"));
    const mins = st.minutes.map((m) => new Date(m.start).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }));
    fill("requests", plot("requests", mins, { requests: st.minutes.map((m) => m.requests), errors: st.minutes.map((m) => m.errors) }));
    fill("latency", plot("latency", mins, { p50: st.minutes.map((m) => m.p50_ms), p95: st.minutes.map((m) => m.p95_ms), p99: st.minutes.map((m) => m.p99_ms) }));
    fill("by-source", plot("by-source", st.days, byDay(st.days, st.tokens_by_source)));
    fill("by-model", plot("by-model", st.days, byDay(st.days, st.tokens_by_model)));
    const main = $("#panels");
    const seen = new Set();
    for (const t of st.tables) {
      seen.add(t.id);
      let sec = $(`[data-panel="${t.id}"]`);
      if (!sec) {
        sec = el("section", { "data-panel": t.id });
        sec.appendChild(el("h2", {}, t.title));
        sec.appendChild(el("div", { class: "body" }));
        main.appendChild(sec);
      }
      const body = $(".body", sec);
      body.replaceChildren(table(t.columns, t.rows));
      if (t.note) body.appendChild(el("p", { class: "empty" }, t.note));
    }
  }

  let timer = null;
  async function poll() {
    try {
      const res = await fetch("/control/api/state", { credentials: "same-origin", cache: "no-store" });
      if (res.status === 401) {
        $("#login").hidden = false;
        $("#panels").hidden = true;
        return;
      }
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const st = await res.json();
      $("#login").hidden = true;
      $("#panels").hidden = false;
      render(st);
      $("#status").textContent = "";
      document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
    } catch (e) {
      $("#status").textContent = `not updated: ${e.message}`;
    }
    timer = setTimeout(poll, 2000);
  }
  fetch("/control/api/session", { credentials: "same-origin", cache: "no-store" })
    .then((r) => r.json())
    .then((s) => {
      $("#title").textContent = `${s.server} control`;
      if (s.authorized) { poll(); return; }
      $("#login").hidden = false;
    })
    .catch((e) => { $("#status").textContent = `not reachable: ${e.message}`; });
})();
