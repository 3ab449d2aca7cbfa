// report.html's script (inlined by harness/html/page.py): the history viewer and the timeline.
// The page's data (the timeline's columns, the history's lines) comes gzipped in base64 and is
// unpacked here; the history viewer renders only the rows in view; the timeline draws on one
// canvas only the operations in the visible time range: all stay quick on 100,000 operations.
"use strict";
window.rqReport = { ready: false, drawn: 0, hits: [] };

async function rqUnpack(id) {
  const el = document.getElementById(id);
  if (!("DecompressionStream" in window)) throw new Error("this browser cannot unpack the report's data (no DecompressionStream)");
  const packed = await (await fetch("data:application/octet-stream;base64," + el.textContent.trim())).blob();
  const text = await new Response(packed.stream().pipeThrough(new DecompressionStream("gzip"))).text();
  el.textContent = ""; // the packed copy is no longer needed
  return text;
}

(async function () {
  const started = performance.now();
  const data = JSON.parse(await rqUnpack("report-data"));
  let lines = []; // the history's lines: unpacked once the timeline is drawn
  const state = window.rqReport;

  // ---- history viewer ---------------------------------------------------------------------
  const ROW = 18;
  const NEMESIS = /"process":\s*"nemesis"/;
  const hv = document.getElementById("hv");
  const spacer = document.getElementById("hv-spacer");
  const countLabel = document.getElementById("hv-count");
  let shown = null; // null: every line; else the indices of the lines the filter keeps
  let hits = new Set();

  function total() { return shown ? shown.length : lines.length; }
  function lineAt(k) { return shown ? shown[k] : k; }

  function renderRows() {
    if (!hv) return;
    spacer.style.height = total() * ROW + "px";
    for (const old of hv.querySelectorAll(".hl-row")) old.remove();
    const first = Math.max(0, Math.floor(hv.scrollTop / ROW) - 8);
    const last = Math.min(total(), Math.ceil((hv.scrollTop + hv.clientHeight) / ROW) + 8);
    const frag = document.createDocumentFragment();
    for (let k = first; k < last; k++) {
      const i = lineAt(k);
      const row = document.createElement("div");
      row.className = "hl-row" + (NEMESIS.test(lines[i]) ? " nemesis" : "") + (hits.has(i) ? " hit" : "");
      row.style.top = k * ROW + "px";
      row.dataset.i = i;
      const n = document.createElement("span");
      n.className = "n";
      n.textContent = i;
      row.append(n, lines[i]);
      row.title = lines[i];
      frag.append(row);
    }
    hv.append(frag);
  }

  function showLines(indices) {
    if (!hv || !indices.length) return;
    hits = new Set(indices);
    state.hits = indices.slice();
    const first = Math.min(...indices);
    if (shown && !shown.includes(first)) clearFilter();
    const k = shown ? shown.indexOf(first) : first;
    spacer.style.height = total() * ROW + "px"; // before scrolling: the filter may be gone
    document.getElementById("history").scrollIntoView({ block: "start" });
    hv.scrollTop = Math.max(0, k * ROW - hv.clientHeight / 3);
    renderRows();
  }

  function clearFilter() {
    const input = document.getElementById("hv-filter");
    if (input) input.value = "";
    shown = null;
    countLabel.textContent = "";
  }

  function route() {
    const hash = decodeURIComponent(location.hash.slice(1));
    if (hash.startsWith("h-")) {
      showLines(hash.slice(2).split(",").map(Number).filter((n) => Number.isInteger(n) && n >= 0 && n < lines.length));
    } else if (hash.startsWith("ex-")) {
      const link = document.querySelector('a.example[href="#' + CSS.escape(hash) + '"]');
      if (link) showLines(link.dataset.lines.split(",").filter(Boolean).map(Number));
    }
  }

  function startViewer() {
    if (!hv) return;
    hv.addEventListener("scroll", renderRows, { passive: true });
    let timer = 0;
    document.getElementById("hv-filter").addEventListener("input", (e) => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        const text = e.target.value.toLowerCase();
        shown = null;
        if (text) {
          shown = [];
          for (let i = 0; i < lines.length; i++) if (lines[i].toLowerCase().includes(text)) shown.push(i);
          countLabel.textContent = shown.length + " lines hold it";
        } else countLabel.textContent = "";
        hv.scrollTop = 0;
        renderRows();
      }, 150);
    });
    document.getElementById("hv-goto").addEventListener("change", (e) => {
      if (e.target.value !== "") location.hash = "#h-" + e.target.value;
    });
    renderRows();
  }

  // ---- timeline ---------------------------------------------------------------------------
  const tl = data.timeline;
  const canvas = document.getElementById("tl-canvas");
  const OUTCOME = ["ok", "fail", "info", "open"];
  const COLOUR = ["#2e9d5b", "#d8485a", "#e0a526", "#8a94a0"];
  const LEFT = 68, AXIS = 22, STRIP_ROW = 16;

  // each fault kind's colour, as the harness gives it in the PNGs too (harness/colours.py)
  const colours = new Map();
  for (const f of (tl && tl.faults) || []) colours.set(f.kind, f.colour || "#8a94a0");
  function kindColour(kind, alpha) {
    const hex = colours.get(kind) || "#8a94a0";
    const rgb = [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16));
    return "rgba(" + rgb.join(", ") + ", " + alpha + ")";
  }

  // what each process was (publisher, sync or async claimer): a letter by its lane, the
  // word in the tooltip and the legend
  const ROLE_MARK = { publisher: " P", "sync claimer": " S", "async claimer": " A", worker: " W", claimer: " C" };
  function roleMark(l) { return tl.roles ? ROLE_MARK[tl.roles[l]] || "" : ""; }
  function roleName(l) { return tl.roles ? " (" + tl.roles[l] + ")" : ""; }

  if (tl && canvas) {
    const n = tl.t0.length;
    const t0 = Float64Array.from(tl.t0), t1 = Float64Array.from(tl.t1);
    const lane = Int32Array.from(tl.lane), type = Uint8Array.from(tl.type);
    const maxEnd = new Float64Array(n); // max of t1 up to each op: where a range's ops begin
    for (let k = 0, m = -Infinity; k < n; k++) maxEnd[k] = m = Math.max(m, t1[k]);
    const perLane = tl.procs.map(() => []);
    for (let k = 0; k < n; k++) perLane[lane[k]].push(k);
    const marked = new Set(tl.mark);
    const faults = tl.faults;
    const stripRow = []; // each fault's row in the strip: overlapping faults stack
    const rowEnds = [];
    for (const f of faults) {
      let r = rowEnds.findIndex((e) => e <= f.start);
      if (r < 0) { r = rowEnds.length; rowEnds.push(0); }
      rowEnds[r] = f.end;
      stripRow.push(r);
    }
    const full = [0, Math.max(tl.end, 1e-3)];
    let view = full.slice();
    const lanes = tl.procs.length;
    const laneH = Math.max(2, Math.min(16, Math.floor(520 / Math.max(lanes, 1))));
    const top = Math.max(rowEnds.length, 1) * STRIP_ROW + AXIS;
    const height = top + lanes * laneH + 6;

    const legend = document.getElementById("tl-legend");
    const kinds = [...new Set(faults.map((f) => f.kind))];
    legend.innerHTML = "";
    OUTCOME.forEach((o, i) => legend.insertAdjacentHTML("beforeend", '<span><i style="background:' + COLOUR[i] + '"></i>' + o + "</span>"));
    for (const kind of kinds) {
      const s = document.createElement("span");
      s.innerHTML = '<i style="background:' + kindColour(kind, 0.45) + '"></i>';
      s.append("fault: " + kind);
      legend.append(s);
    }
    legend.insertAdjacentHTML("beforeend", '<span><i style="background:#fff;border:2px solid #7a0019"></i>in an anomaly\'s example</span>');
    if (tl.roles) legend.insertAdjacentHTML("beforeend", "<span>lanes: P publisher, S sync claimer, A async claimer, W worker process, C claimer</span>");

    let width = 0;
    function size() {
      const dpr = window.devicePixelRatio || 1;
      width = canvas.clientWidth;
      canvas.style.height = height + "px";
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height * dpr);
      canvas.getContext("2d").setTransform(dpr, 0, 0, dpr, 0, 0);
    }
    const x = (t) => LEFT + ((t - view[0]) / (view[1] - view[0])) * (width - LEFT - 8);
    const tAt = (px) => view[0] + ((px - LEFT) / (width - LEFT - 8)) * (view[1] - view[0]);

    function firstInView() { // the first op whose span can reach view[0]
      let lo = 0, hi = n;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (maxEnd[mid] < view[0]) lo = mid + 1; else hi = mid; }
      return lo;
    }

    function step(span) {
      const raw = span / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
      return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
    }

    function draw() {
      const ctx = canvas.getContext("2d");
      ctx.clearRect(0, 0, width, height);
      ctx.font = "11px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      // lanes
      for (let l = 0; l < lanes; l += 2) { ctx.fillStyle = "#f7f8fa"; ctx.fillRect(LEFT, top + l * laneH, width - LEFT, laneH); }
      // faults: shaded across every lane, named in the strip
      faults.forEach((f, i) => {
        if (f.end < view[0] || f.start > view[1]) return;
        const a = Math.max(LEFT, x(f.start)), b = Math.min(width, Math.max(x(f.end), a + 2));
        ctx.fillStyle = kindColour(f.kind, 0.16);
        ctx.fillRect(a, top, b - a, lanes * laneH);
        const y = stripRow[i] * STRIP_ROW;
        ctx.fillStyle = kindColour(f.kind, 0.45);
        ctx.fillRect(a, y + 1, b - a, STRIP_ROW - 2);
        ctx.save(); ctx.beginPath(); ctx.rect(a, y, b - a, STRIP_ROW); ctx.clip();
        ctx.fillStyle = "#111"; ctx.fillText(f.label + (f.open ? " (never ended)" : ""), a + 3, y + STRIP_ROW / 2);
        ctx.restore();
      });
      // axis
      const s = step(view[1] - view[0]);
      ctx.fillStyle = "#5b6570"; ctx.strokeStyle = "#d8dde3";
      ctx.beginPath();
      for (let t = Math.ceil(view[0] / s) * s; t <= view[1]; t += s) {
        const px = Math.round(x(t)) + 0.5;
        ctx.moveTo(px, top - 4); ctx.lineTo(px, height);
        ctx.fillText((s < 1 ? t.toFixed(Math.min(3, -Math.floor(Math.log10(s)))) : t.toFixed(0)) + " s", px + 2, top - AXIS / 2);
      }
      ctx.stroke();
      // operations: one pass per outcome (one fill colour each), then the marked ones
      const from = firstInView();
      let last = from;
      while (last < n && t0[last] <= view[1]) last++;
      // a lane's operations that touch within a pixel are filled as one rectangle
      const runA = new Float64Array(lanes), runB = new Float64Array(lanes);
      const h = Math.max(1, laneH - 1);
      for (let o = 0; o < 4; o++) {
        ctx.fillStyle = COLOUR[o];
        runB.fill(-1);
        for (let k = from; k < last; k++) {
          if (type[k] !== o || t1[k] < view[0]) continue;
          const l = lane[k];
          const a = Math.max(LEFT, x(t0[k])), b = Math.max(a + 1, Math.min(width, x(t1[k])));
          if (runB[l] >= 0 && a <= runB[l] + 1) { if (b > runB[l]) runB[l] = b; continue; }
          if (runB[l] >= 0) ctx.fillRect(runA[l], top + l * laneH, runB[l] - runA[l], h);
          runA[l] = a; runB[l] = b;
        }
        for (let l = 0; l < lanes; l++) if (runB[l] >= 0) ctx.fillRect(runA[l], top + l * laneH, runB[l] - runA[l], h);
      }
      ctx.strokeStyle = "#7a0019"; ctx.lineWidth = 2;
      for (const k of marked) {
        if (t1[k] < view[0] || t0[k] > view[1]) continue;
        const a = Math.max(LEFT, x(t0[k])), b = Math.max(a + 3, x(t1[k]));
        ctx.strokeRect(a - 1, top + lane[k] * laneH - 1, b - a + 2, laneH + 1);
      }
      ctx.lineWidth = 1;
      // process labels
      ctx.fillStyle = "#fff"; ctx.fillRect(0, top, LEFT, lanes * laneH);
      ctx.fillStyle = "#5b6570";
      const every = Math.ceil(12 / laneH);
      for (let l = 0; l < lanes; l += every) ctx.fillText("p" + tl.procs[l] + roleMark(l), 4, top + l * laneH + laneH / 2);
      ctx.fillText("faults", 4, (top - AXIS) / 2);
      state.drawn = last - from;
      document.getElementById("tl-range").textContent =
        view[0].toFixed(3) + " s to " + view[1].toFixed(3) + " s: " + (last - from) + " of " + n + " operations in view";
    }

    function opAt(px, py) {
      const l = Math.floor((py - top) / laneH);
      if (l < 0 || l >= lanes) return -1;
      const t = tAt(px), tol = 3 * (view[1] - view[0]) / (width - LEFT);
      const ks = perLane[l];
      let lo = 0, hi = ks.length; // the last op of the lane invoked at or before t + tol
      while (lo < hi) { const mid = (lo + hi) >> 1; if (t0[ks[mid]] <= t + tol) lo = mid + 1; else hi = mid; }
      for (let m = lo - 1; m >= Math.max(0, lo - 3); m--) if (t1[ks[m]] >= t - tol) return ks[m];
      return -1;
    }

    function faultAt(px, py) {
      if (py >= top - AXIS) return -1;
      const t = tAt(px), r = Math.floor(py / STRIP_ROW);
      return faults.findIndex((f, i) => stripRow[i] === r && f.start <= t && t <= f.end);
    }

    const tip = document.getElementById("tl-tip");
    function showTip(px, py, text) {
      tip.textContent = text;
      tip.hidden = false;
      tip.style.maxWidth = width - 8 + "px";
      tip.style.left = Math.max(0, Math.min(px + 12, width - tip.offsetWidth - 4)) + "px";
      tip.style.top = py + 14 + "px";
    }

    let drag = null;
    canvas.addEventListener("mousedown", (e) => { drag = { x: e.offsetX, view: view.slice(), moved: false }; });
    window.addEventListener("mouseup", (e) => {
      if (drag && !drag.moved && e.target === canvas) {
        const k = opAt(e.offsetX, e.offsetY), f = faultAt(e.offsetX, e.offsetY);
        const at = k >= 0 ? [tl.i[k], tl.j[k]] : f >= 0 ? [faults[f].i, faults[f].j] : [];
        const ok = at.filter((i) => i !== null && i >= 0);
        if (ok.length) location.hash = "#h-" + ok.join(",");
      }
      drag = null;
    });
    canvas.addEventListener("mousemove", (e) => {
      if (drag) {
        const dt = ((e.offsetX - drag.x) / (width - LEFT - 8)) * (drag.view[1] - drag.view[0]);
        if (Math.abs(e.offsetX - drag.x) > 2) drag.moved = true;
        view = [drag.view[0] - dt, drag.view[1] - dt];
        requestAnimationFrame(draw);
        return;
      }
      const k = opAt(e.offsetX, e.offsetY);
      const f = k < 0 ? faultAt(e.offsetX, e.offsetY) : -1;
      if (k >= 0) {
        const ms = ((t1[k] - t0[k]) * 1000).toFixed(1);
        showTip(e.offsetX, e.offsetY, "p" + tl.procs[lane[k]] + roleName(lane[k]) + " " + tl.fs[tl.f[k]] + ": " + OUTCOME[type[k]] +
          " after " + ms + " ms (" + t0[k].toFixed(3) + " s)\n" + (lines[tl.i[k]] || "").slice(0, 160) +
          (tl.j[k] >= 0 ? "\n" + (lines[tl.j[k]] || "").slice(0, 160) : ""));
      } else if (f >= 0) {
        const fa = faults[f];
        showTip(e.offsetX, e.offsetY, fa.label + ": " + fa.start.toFixed(3) + " s to " + fa.end.toFixed(3) + " s" + (fa.open ? " (never ended)" : ""));
      } else tip.hidden = true;
    });
    canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
    canvas.addEventListener("wheel", (e) => {
      e.preventDefault();
      const t = tAt(e.offsetX), k = Math.exp(e.deltaY * 0.0015);
      const span = Math.max(1e-3, (view[1] - view[0]) * k);
      const r = (t - view[0]) / (view[1] - view[0]);
      view = [t - r * span, t - r * span + span];
      requestAnimationFrame(draw);
    }, { passive: false });
    document.getElementById("tl-reset").addEventListener("click", () => { view = full.slice(); draw(); });
    window.addEventListener("resize", () => { size(); draw(); });
    // for tests and the console: show a time range; where operation k is drawn (CSS px)
    state.zoom = (a, b) => { view = [a, b]; draw(); return state.drawn; };
    state.position = (k) => ({ x: (Math.max(LEFT, x(t0[k])) + Math.max(x(t0[k]) + 1, x(t1[k]))) / 2, y: top + lane[k] * laneH + laneH / 2 });
    size();
    const drawStart = performance.now();
    draw();
    state.drawMs = performance.now() - drawStart;
  }
  state.timelineAt = performance.now(); // ms since the navigation began

  const history = await rqUnpack("history-data");
  lines = history === "" ? [] : history.split("\n");
  startViewer();
  window.addEventListener("hashchange", route);
  document.addEventListener("click", (e) => {
    const a = e.target.closest && e.target.closest('a[href^="#h-"], a[href^="#ex-"]');
    if (a && a.getAttribute("href") === location.hash) route(); // the same link again
  });
  route();
  state.ready = true;
  state.loadMs = performance.now() - started;
  state.readyAt = performance.now(); // ms since the navigation began
})().catch((e) => {
  console.error(e);
  document.querySelector("main").insertAdjacentHTML("afterbegin", '<p class="note" id="unpack-error"></p>');
  document.getElementById("unpack-error").textContent = "The timeline and history cannot be shown: " + e.message;
});
