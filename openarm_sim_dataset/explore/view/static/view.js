/* dataset-view: the page. Plain JavaScript, no libraries, nothing from the internet.
 *
 * Routes (URL fragment): #/ the episode list; #/episode/<id>?t=<seconds> an episode at a time.
 * Times inside are integer nanoseconds from the episode's first stamp (exact as JS numbers up to 104
 * days); the frame shown for a time is the camera's last frame stamped at or before it (its first
 * frame before that). The DOM says what is shown, for people and for tests: #scrub aria-valuenow (the
 * time, ns), each figure.camera data-shown-ts (the absolute stamp of the frame on screen).
 */
"use strict";
(() => {
  const GUTTER_L = 64, GUTTER_R = 16;  // the time axis of the scrubber and of every plot (view.css)
  const COLORS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#999933", "#222222"];
  const app = document.getElementById("app");
  let dataset = null, validation = null, current = null, listView = null, pollTimer = null;

  // ------------------------------------------------------------------ helpers
  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"}[c]));
  const el = (tag, attrs = {}, ...children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.assign(e.dataset, v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  };
  async function getJSON(url, opts) {
    const r = await fetch(url, Object.assign({cache: "no-store"}, opts || {}));
    let body = null;
    try { body = await r.json(); } catch (e) { body = {error: `${r.status} ${r.statusText}`}; }
    if (!r.ok && r.status !== 409) throw new Error(body.error || `${r.status} ${r.statusText}`);
    return body;
  }
  /** the dataset's metadata file: metadata.yaml, or a LeRobot dataset's meta/info.json */
  const metaFile = () => (dataset && dataset.metadata_file) || "metadata.yaml";
  const fmtS = (ns, digits = 3) => (ns / 1e9).toFixed(digits);
  const fmtDur = (s) => s === null || s === undefined ? "–" : s < 120 ? `${s.toFixed(2)} s` : `${Math.floor(s / 60)} min ${(s % 60).toFixed(0)} s`;
  /** index of the last element <= x in a sorted array (-1 if none) */
  function lastAtOrBefore(arr, x) {
    let lo = 0, hi = arr.length - 1, ans = -1;
    while (lo <= hi) { const mid = (lo + hi) >> 1; if (arr[mid] <= x) { ans = mid; lo = mid + 1; } else hi = mid - 1; }
    return ans;
  }
  function niceTicks(lo, hi, n) {
    const span = hi - lo;
    if (!(span > 0)) return [lo];
    const raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(10));
    return out;
  }
  function badge(verdict, title) {
    const text = {valid: "valid", warn: "valid, warned", invalid: "INVALID", unchecked: "not checked", unset: "not validated"}[verdict] || verdict;
    return `<span class="badge ${esc(verdict)}"${title ? ` title="${esc(title)}"` : ""}>${esc(text)}</span>`;
  }

  // ------------------------------------------------------------------ validation status (header)
  function showValidation(v) {
    const changed = validation && v.version !== validation.version;
    validation = v;
    const box = document.getElementById("validation-status"), btn = document.getElementById("validate-button");
    box.className = "status" + (v.state === "running" ? " running" : "");
    box.dataset.state = v.state;
    if (v.state === "running") box.textContent = `validating… ${v.elapsed_s ?? 0} s`;
    else if (v.state === "error") box.textContent = `validation failed to run: ${v.message}`;
    else if (v.state === "done") {
      const c = v.checks || {};
      box.textContent = `validation: ${v.valid ? "valid" : "INVALID"} (${c.failed ?? "?"} failed, ${c.warned ?? "?"} warned, ${c.skipped ?? "?"} skipped of ${(v.rows || []).length} checks)`;
      box.title = v.source || "";
    } else box.textContent = `no validation report: verdicts from ${metaFile()}`;
    btn.hidden = v.state === "running";
    btn.textContent = v.state === "done" ? "Validate again" : "Validate now";
    if (v.state === "running" && !pollTimer) pollTimer = setInterval(poll, 1000);
    if (v.state !== "running" && pollTimer) { clearInterval(pollTimer); pollTimer = null; }
    if (changed) refresh();
  }
  async function poll() {
    try { showValidation(await getJSON("/api/validation")); } catch (e) { /* the server stopped: keep the page */ }
  }
  document.getElementById("validate-button").addEventListener("click", async () => {
    try { showValidation(await getJSON("/api/validate", {method: "POST"})); } catch (e) { alert(e.message); }
  });
  function refresh() {
    if (current) { const t = current.t; const id = current.ep.id; showEpisode(id, new URLSearchParams(`t=${t / 1e9}`)); }
    else if (document.body.dataset.page === "list") showList();
  }

  // ------------------------------------------------------------------ routing
  function route() {
    if (current) { current.destroy(); current = null; }
    const m = (location.hash || "#/").match(/^#\/episode\/([^?]+)(?:\?(.*))?$/);
    if (m) showEpisode(decodeURIComponent(m[1]), new URLSearchParams(m[2] || ""));
    else showList();
  }
  window.addEventListener("hashchange", route);

  async function init() {
    try {
      dataset = await getJSON("/api/dataset");
    } catch (e) {
      app.innerHTML = `<p class="error">${esc(e.message)}</p>`;
      return;
    }
    document.getElementById("dataset-name").textContent = `${dataset.path} · layout ${dataset.version} · ${dataset.episodes} episodes`;
    document.title = `${dataset.name} · dataset-view`;
    showValidation(dataset.validation);
    route();
  }

  // ------------------------------------------------------------------ the list
  const COLUMNS = [
    ["index", "#", (r) => r.index], ["id", "episode", (r) => r.id], ["prompt", "task", (r) => `${r.prompt ?? ""} ${r.task ?? ""}`],
    ["success", "success", (r) => r.success === true ? 1 : r.success === false ? 0 : -1], ["outcome", "outcome", (r) => r.outcome ?? ""],
    ["duration_s", "duration", (r) => r.duration_s ?? -1], ["cameras", "cameras", (r) => r.cameras.filter((c) => c.format).length],
    ["verdict", "validation", (r) => ({invalid: 0, warn: 1, unchecked: 2, valid: 3}[verdictOf(r)] ?? 4)],
  ];
  const verdictOf = (r) => r.verdict ?? (r.valid === true ? "valid" : r.valid === false ? "invalid" : "unset");

  async function showList() {
    document.body.dataset.page = "loading-list";
    const t0 = performance.now();
    let data;
    try { data = await getJSON("/api/episodes"); } catch (e) { app.innerHTML = `<p class="error">${esc(e.message)}</p>`; return; }
    if (current || !/^#?\/?$/.test(location.hash)) return;  // navigated away meanwhile
    showValidation(data.validation);
    listView = listView || {sort: "index", dir: 1, filter: "", verdict: "all"};
    listView.rows = data.episodes;
    app.innerHTML = "";
    const rows = data.episodes;
    const succ = rows.filter((r) => r.success === true).length, withS = rows.filter((r) => typeof r.success === "boolean").length;
    const counts = {};
    for (const r of rows) counts[verdictOf(r)] = (counts[verdictOf(r)] || 0) + 1;
    const total = rows.reduce((a, r) => a + (r.duration_s || 0), 0);
    const search = el("input", {type: "search", placeholder: "filter: id, task, prompt, outcome, check…", value: listView.filter, "aria-label": "filter"});
    const select = el("select", {"aria-label": "validation filter"},
      ...["all", "invalid", "warn", "valid", "unchecked", "unset"].map((v) => el("option", {value: v, text: v === "all" ? "every verdict" : v, selected: v === listView.verdict})));
    const shown = el("span", {class: "summary", id: "shown-count"});
    app.append(el("h1", {text: `${rows.length} episode${rows.length === 1 ? "" : "s"}`}),
      el("div", {class: "summary", text: `${withS ? `success ${succ}/${withS} (${(100 * succ / withS).toFixed(1)} %) · ` : ""}total ${fmtDur(total)} · ` +
        Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(", ") +
        (dataset.cameras.length ? ` · cameras ${dataset.cameras.join(", ")}` : " · no cameras")}),
      el("div", {class: "toolbar"}, search, select, shown));
    const table = el("table", {class: "episodes", id: "episodes"});
    const head = el("tr");
    for (const [key, label] of COLUMNS) {
      const th = el("th", {text: label, dataset: {key}, class: listView.sort === key ? (listView.dir > 0 ? "sorted-asc" : "sorted-desc") : null});
      th.addEventListener("click", () => {
        listView.dir = listView.sort === key ? -listView.dir : 1;
        listView.sort = key;
        for (const h of head.children) h.className = h.dataset.key === key ? (listView.dir > 0 ? "sorted-asc" : "sorted-desc") : "";
        fillBody();
      });
      head.append(th);
    }
    const body = el("tbody");
    table.append(el("thead", {}, head), body);
    app.append(table);
    body.addEventListener("click", (ev) => {
      const tr = ev.target.closest("tr[data-id]");
      if (tr && !ev.target.closest("a")) location.hash = `#/episode/${encodeURIComponent(tr.dataset.id)}`;
    });
    function fillBody() {
      const f = listView.filter.trim().toLowerCase(), want = listView.verdict;
      const col = COLUMNS.find((c) => c[0] === listView.sort) || COLUMNS[0], key = col[2], dir = listView.dir;
      let list = rows.filter((r) => (want === "all" || verdictOf(r) === want) &&
        (!f || `${r.id} ${r.prompt ?? ""} ${r.task ?? ""} ${r.outcome ?? ""} ${r.checks.map((c) => c.check).join(" ")}`.toLowerCase().includes(f)));
      list = list.slice().sort((a, b) => { const x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : a.index - b.index) * dir; });
      const html = [];
      for (const r of list) {
        const v = verdictOf(r);
        const href = `#/episode/${encodeURIComponent(r.id)}`;
        const cams = r.cameras.map((c) => `<span class="cam${c.format ? "" : " missing"}" title="${c.format ? esc(c.format) : "missing"}">${esc(c.name)}</span>`).join("");
        const checks = r.checks.length ? `<div class="checks">${r.checks.map((c) => esc(c.check)).join(", ")}</div>` : "";
        const src = r.verdict ? "" : r.valid !== undefined && r.valid !== null ? `from ${metaFile()} (validated ${r.validated_at ?? "?"})` : `${metaFile()} has no valid flag`;
        html.push(`<tr data-id="${esc(r.id)}" data-verdict="${esc(v)}"><td class="num">${r.index}</td><td class="id"><a href="${href}">${esc(r.id)}</a></td>` +
          `<td class="prompt">${esc(r.prompt ?? "")}${r.task ? ` <span class="checks">${esc(r.task)}</span>` : ""}</td>` +
          `<td>${r.success === true ? "<span class=\"yes\">✓ yes</span>" : r.success === false ? "<span class=\"no\">✗ no</span>" : "–"}</td>` +
          `<td>${esc(r.outcome ?? "")}</td><td class="num" title="${esc(r.stream_error ?? "")}">${r.duration_s === null ? "?" : r.duration_s.toFixed(2) + " s"}</td>` +
          `<td>${cams}</td><td>${badge(v, src)}${r.findings ? ` <span class="checks">${r.findings} timed</span>` : ""}${checks}</td></tr>`);
      }
      body.innerHTML = html.join("");
      shown.textContent = list.length === rows.length ? "" : `${list.length} shown`;
    }
    let timer = null;
    search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => { listView.filter = search.value; fillBody(); }, 80); });
    select.addEventListener("change", () => { listView.verdict = select.value; fillBody(); });
    fillBody();
    document.body.dataset.listMs = (performance.now() - t0).toFixed(1);
    document.body.dataset.page = "list";
  }

  // ------------------------------------------------------------------ an episode
  async function showEpisode(id, params) {
    document.body.dataset.page = "loading-episode";
    let ep;
    try { ep = await getJSON(`/api/episode/${encodeURIComponent(id)}`); } catch (e) {
      app.innerHTML = `<p><a href="#/">← episodes</a></p><p class="error">${esc(e.message)}</p>`;
      document.body.dataset.page = "error";
      return;
    }
    if (current) current.destroy();
    current = new EpisodeView(ep, params);
  }

  class EpisodeView {
    constructor(ep, params) {
      this.ep = ep;
      this.dur = Math.max(ep.duration_ns, 1);
      this.t = 0;
      this.playing = false;
      this.speed = 1;
      this.cams = [];
      this.plots = [];
      this.listeners = [];
      this.build();
      const t = parseFloat(params.get("t"));
      this.setTime(Number.isFinite(t) ? Math.round(t * 1e9) : 0, false);
      document.body.dataset.page = "episode";
    }

    on(target, type, fn, opts) { target.addEventListener(type, fn, opts); this.listeners.push([target, type, fn, opts]); }

    destroy() {
      this.playing = false;
      for (const [t, type, fn, opts] of this.listeners) t.removeEventListener(type, fn, opts);
      cancelAnimationFrame(this.raf);
    }

    build() {
      const ep = this.ep, entry = ep.entry || {};
      app.innerHTML = "";
      const nav = el("span", {class: "nav"},
        el("a", {href: "#/", text: "← episodes"}),
        ep.prev !== null ? el("a", {href: `#/episode/${encodeURIComponent(ep.prev)}`, text: `‹ ${ep.prev}`, id: "prev-episode"}) : null,
        el("span", {class: "note", text: `${ep.index + 1} of ${ep.count}`}),
        ep.next !== null ? el("a", {href: `#/episode/${encodeURIComponent(ep.next)}`, text: `${ep.next} ›`, id: "next-episode"}) : null);
      app.append(el("div", {class: "ep-head"}, el("h1", {text: `Episode ${ep.id}`}), nav));
      const facts = el("div", {class: "facts"});
      const fact = (k, v) => { if (v !== null && v !== undefined && v !== "") facts.append(el("span", {}, `${k} `, el("b", {text: String(v)}))); };
      fact("task", ep.prompt);
      fact("registry task", entry.task);
      fact("success", entry.success === true ? "yes" : entry.success === false ? "no" : null);
      fact("outcome", entry.outcome);
      fact("duration", fmtDur(ep.duration_ns / 1e9));
      fact("first stamp", `${ep.t0_ns} ns`);
      const verdict = ep.verdict ?? (entry.valid === true ? "valid" : entry.valid === false ? "invalid" : "unset");
      const vb = el("span", {id: "verdict"});
      vb.innerHTML = `validation ${badge(verdict, ep.verdict ? validation?.source : `from ${metaFile()}`)}`;
      facts.append(vb);
      app.append(facts);
      for (const e of ep.errors) app.append(el("p", {class: "error", text: e}));

      // cameras
      const camRow = el("div", {class: "cameras", id: "cameras"});
      for (const c of ep.cameras) {
        const img = el("img", {alt: `${c.name}`, dataset: {camera: c.name}});
        const cap = el("figcaption");
        const fig = el("figure", {class: "camera", dataset: {camera: c.name, frames: c.frames}}, img, cap);
        camRow.append(fig);
        this.cams.push({info: c, fig, img, cap, want: -1, shown: -1, loading: false, scale: 0});
      }
      if (!ep.cameras.length) camRow.append(el("p", {class: "note", text: "no cameras"}));
      app.append(camRow);

      // controls
      this.playBtn = el("button", {type: "button", id: "play", text: "▶ play", title: "Space"});
      this.on(this.playBtn, "click", () => this.togglePlay());
      const speed = el("select", {"aria-label": "speed"}, ...[0.25, 0.5, 1, 2, 4].map((s) => el("option", {value: s, text: `${s}×`, selected: s === 1})));
      this.on(speed, "change", () => { this.speed = parseFloat(speed.value); });
      this.timeBox = el("span", {id: "time"});
      const prevF = el("button", {type: "button", text: "‹ finding", title: "[", id: "prev-finding"});
      const nextF = el("button", {type: "button", text: "finding ›", title: "]", id: "next-finding"});
      this.on(prevF, "click", () => this.stepFinding(-1));
      this.on(nextF, "click", () => this.stepFinding(1));
      app.append(el("div", {class: "controls"}, this.playBtn, speed, this.timeBox, prevF, nextF,
        el("span", {class: "hint", text: "drag the bar or a plot · ←/→ frame · Shift+←/→ 1 s · Space play · [ ] finding"})));

      // the scrubber: one slider over the episode, the findings on it
      this.scrub = el("div", {class: "scrub", id: "scrub", role: "slider", tabindex: "0", "aria-label": "time (ns from the first stamp)",
        "aria-valuemin": "0", "aria-valuemax": String(ep.duration_ns)});
      this.fill = el("div", {class: "fill"});
      this.handle = el("div", {class: "handle"});
      this.scrub.append(el("div", {class: "track"}), this.fill);
      this.markers = [];
      ep.findings.forEach((f, i) => {
        const left = 100 * f.t_ns / this.dur;
        const span = f.end_ns !== null && (f.end_ns - f.t_ns) / this.dur > 0.004;  // narrower: a point marker
        const m = el("div", {class: `marker ${f.level === "warn" ? "warn" : ""} ${span ? "span" : ""}`, dataset: {tNs: f.t_ns, check: f.check, index: i},
          title: `${f.check} at ${fmtS(f.t_ns)} s${span ? `–${fmtS(f.end_ns)} s` : ""}: ${f.what}${f.where ? ` (${f.where})` : ""}`});
        m.style.left = `${left}%`;
        if (span) m.style.width = `${100 * (f.end_ns - f.t_ns) / this.dur}%`;
        this.on(m, "pointerdown", (ev) => ev.stopPropagation());
        this.on(m, "click", (ev) => { ev.stopPropagation(); this.pause(); this.setTime(f.t_ns); this.scrub.focus({preventScroll: true}); });
        this.scrub.append(m);
        this.markers.push(m);
      });
      this.scrub.append(this.handle);
      app.append(this.scrub);
      const axis = el("div", {class: "axis"});
      for (const s of niceTicks(0, this.dur / 1e9, 10)) {
        const sp = el("span", {text: `${+s.toFixed(3)} s`});
        sp.style.left = `${100 * s * 1e9 / this.dur}%`;
        axis.append(sp);
      }
      app.append(axis);
      this.dragOn(this.scrub, (ev) => {
        const r = this.scrub.getBoundingClientRect();
        return Math.round(Math.min(Math.max((ev.clientX - r.left) / r.width, 0), 1) * this.dur);
      });
      this.on(this.scrub, "keydown", (ev) => this.key(ev));
      this.on(document, "keydown", (ev) => { if (ev.target === document.body) this.key(ev); });

      // plots
      const plots = el("div", {class: "plots", id: "plots"});
      for (const p of ep.panels) {
        const plot = new Plot(p, this);
        plots.append(plot.root);
        this.plots.push(plot);
      }
      if (!ep.panels.length) plots.append(el("p", {class: "note", text: "no joint streams"}));
      app.append(plots);

      // the validator
      app.append(el("h2", {text: "Validator"}));
      const rep = validation && validation.state === "done";
      if (!rep) app.append(el("p", {class: "note", text: `No validation report: press “Validate now” (dataset-validate DIR --json --no-update-metadata), or start dataset-view with --report FILE. ${dataset.lerobot ? "A LeRobot dataset keeps no verdict of its own." : `The verdict above is ${metaFile()}'s valid flag.`}`}));
      if (ep.findings.length) {
        const tb = el("tbody");
        this.rows = ep.findings.map((f) => {
          const tr = el("tr", {dataset: {tNs: f.t_ns}},
            el("td", {class: "num", text: `${fmtS(f.t_ns)} s`}), el("td", {class: f.level === "warn" ? "lvl-warn" : "lvl-fail", text: f.level === "warn" ? "warn" : "FAIL"}),
            el("td", {text: f.check}), el("td", {text: f.where}),
            el("td", {text: f.what + (f.end_ns !== null ? ` (until ${fmtS(f.end_ns)} s)` : "")}));
          this.on(tr, "click", () => { this.pause(); this.setTime(f.t_ns); });
          tb.append(tr);
          return tr;
        });
        app.append(el("table", {class: "findings", id: "findings"},
          el("thead", {}, el("tr", {}, ...["time", "", "check", "where", "finding"].map((h) => el("th", {text: h})))), tb));
      } else if (rep) app.append(el("p", {class: "note", text: "No timed finding in this episode."}));
      else this.rows = [];
      this.rows = this.rows || [];
      if (ep.checks.length) {
        app.append(el("h2", {text: "Checks that fail or warn this episode"}));
        const ul = el("ul", {class: "checklist"});
        for (const c of ep.checks) {
          const detail = c.detail.length > 400 ? c.detail.slice(0, 400) + "…" : c.detail;
          ul.append(el("li", {}, el("span", {class: c.status === "warn" ? "lvl-warn" : "lvl-fail", text: c.status === "warn" ? "warn " : "FAIL "}),
            el("b", {text: c.check}), " ", el("span", {class: "detail", text: detail, title: c.detail})));
        }
        app.append(ul);
      }
      const pre = el("pre", {text: JSON.stringify(entry, null, 2)});
      app.append(el("details", {class: "entry"}, el("summary", {text: "metadata entry"}), pre));

      this.on(window, "resize", () => { for (const p of this.plots) p.resize(); this.render(); });
      requestAnimationFrame(() => { for (const p of this.plots) p.resize(); this.render(); });
    }

    /** pointer down + drag on ``target`` sets the time ``toTime(event)`` */
    dragOn(target, toTime) {
      let dragging = false;
      this.on(target, "pointerdown", (ev) => {
        if (ev.button !== 0) return;
        dragging = true;
        target.setPointerCapture(ev.pointerId);
        this.pause();
        this.setTime(toTime(ev));
        ev.preventDefault();
      });
      this.on(target, "pointermove", (ev) => { if (dragging) this.setTime(toTime(ev)); });
      const up = () => { dragging = false; };
      this.on(target, "pointerup", up);
      this.on(target, "pointercancel", up);
    }

    key(ev) {
      if (ev.target && /^(INPUT|SELECT|TEXTAREA)$/.test(ev.target.tagName)) return;
      const ref = this.cams.find((c) => c.info.frames > 0);
      let t = null;
      if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
        const dir = ev.key === "ArrowRight" ? 1 : -1;
        if (ev.shiftKey || !ref) t = this.t + dir * (ev.shiftKey ? 1e9 : 1e8);
        else {
          const ts = ref.info.t_ns, i = lastAtOrBefore(ts, this.t);
          t = dir > 0 ? ts[Math.min(i + 1, ts.length - 1)] : ts[Math.max(ts[i] === this.t ? i - 1 : i, 0)];
        }
      } else if (ev.key === "Home") t = 0;
      else if (ev.key === "End") t = this.dur;
      else if (ev.key === " ") { this.togglePlay(); ev.preventDefault(); return; }
      else if (ev.key === "]") { this.stepFinding(1); ev.preventDefault(); return; }
      else if (ev.key === "[") { this.stepFinding(-1); ev.preventDefault(); return; }
      if (t !== null) { this.pause(); this.setTime(t); ev.preventDefault(); }
    }

    stepFinding(dir) {
      const f = this.ep.findings;
      if (!f.length) return;
      const next = dir > 0 ? f.find((x) => x.t_ns > this.t) : [...f].reverse().find((x) => x.t_ns < this.t);
      if (next) { this.pause(); this.setTime(next.t_ns); }
    }

    togglePlay() { if (this.playing) this.pause(); else this.play(); }
    pause() { this.playing = false; this.playBtn.textContent = "▶ play"; cancelAnimationFrame(this.raf); }
    play() {
      if (this.t >= this.dur) this.setTime(0);
      this.playing = true;
      this.playBtn.textContent = "❚❚ pause";
      let last = performance.now();
      const step = (now) => {
        if (!this.playing) return;
        const t = this.t + (now - last) * 1e6 * this.speed;
        last = now;
        this.setTime(Math.min(Math.round(t), this.dur));
        if (this.t >= this.dur) { this.pause(); return; }
        this.raf = requestAnimationFrame(step);
      };
      this.raf = requestAnimationFrame(step);
    }

    setTime(t, updateUrl = true) {
      this.t = Math.min(Math.max(Math.round(t), 0), this.ep.duration_ns);
      this.render();
      if (updateUrl) {
        clearTimeout(this.urlTimer);
        this.urlTimer = setTimeout(() => history.replaceState(null, "", `#/episode/${encodeURIComponent(this.ep.id)}?t=${(this.t / 1e9).toFixed(9).replace(/\.?0+$/, "")}`), 250);
      }
    }

    render() {
      const t = this.t, frac = t / this.dur;
      this.scrub.setAttribute("aria-valuenow", String(t));
      this.scrub.setAttribute("aria-valuetext", `${fmtS(t)} s`);
      this.scrub.dataset.tNs = String(t);
      this.handle.style.left = `${100 * frac}%`;
      this.fill.style.width = `${100 * frac}%`;
      const abs = (BigInt(this.ep.t0_ns) + BigInt(t)).toString();
      this.timeBox.textContent = `t = ${fmtS(t)} s / ${fmtS(this.ep.duration_ns, 2)} s`;
      this.timeBox.title = `${abs} ns`;
      this.timeBox.dataset.tNs = String(t);
      for (const c of this.cams) this.showFrame(c);
      for (const p of this.plots) p.render(t);
      this.ep.findings.forEach((f, i) => {
        const on = t >= f.t_ns && t <= (f.end_ns ?? f.t_ns);
        this.markers[i].classList.toggle("current", on);
        if (this.rows[i]) this.rows[i].classList.toggle("current", on);
      });
    }

    showFrame(c) {
      const ts = c.info.t_ns;
      if (!ts.length) { c.cap.textContent = `${c.info.name}: no frames`; return; }
      const i = Math.max(lastAtOrBefore(ts, this.t), 0);
      c.cap.innerHTML = `<b>${esc(c.info.name)}</b> frame ${i + 1}/${ts.length} · t = ${fmtS(ts[i])} s`;
      c.cap.title = `${c.info.stamps[i]}.jpeg (${c.info.format})`;
      c.fig.dataset.wantIndex = i;
      c.fig.dataset.wantTs = c.info.stamps[i];
      if (i === c.want) return;
      c.want = i;
      if (!c.loading) this.loadFrame(c, i);
    }

    loadFrame(c, i) {
      c.loading = true;
      const stamp = c.info.stamps[i];
      const url = `/api/frame/${encodeURIComponent(this.ep.id)}/${encodeURIComponent(c.info.name)}/${stamp}.jpeg`;
      const img = new Image();
      img.alt = c.info.name;
      img.dataset.camera = c.info.name;
      const done = () => {
        c.loading = false;
        if (c.want !== c.shown && c.want >= 0) this.loadFrame(c, c.want);
      };
      img.onload = () => {
        if (!c.scale) {
          const w = img.naturalWidth;
          c.scale = w > 480 ? 480 / w : Math.max(1, Math.min(8, Math.floor(360 / w)));
          c.fig.dataset.scale = c.scale;
        }
        img.style.width = `${Math.round(img.naturalWidth * c.scale)}px`;
        img.style.height = `${Math.round(img.naturalHeight * c.scale)}px`;
        if (c.scale < 1) img.style.imageRendering = "auto";
        c.img.replaceWith(img);
        c.img = img;
        c.shown = i;
        c.fig.dataset.shownIndex = i;
        c.fig.dataset.shownTs = stamp;
        c.fig.classList.remove("broken");
        done();
        if (this.playing) for (let k = 1; k <= 3 && i + k < c.info.stamps.length; k++) {
          const pre = new Image();
          pre.src = `/api/frame/${encodeURIComponent(this.ep.id)}/${encodeURIComponent(c.info.name)}/${c.info.stamps[i + k]}.jpeg`;
        }
      };
      img.onerror = () => {
        c.shown = i;
        c.fig.dataset.shownIndex = i;
        c.fig.dataset.shownTs = "error";
        c.fig.classList.add("broken");
        c.cap.textContent = `${c.info.name}: frame ${stamp} could not be loaded`;
        done();
      };
      img.src = url;
    }
  }

  // ------------------------------------------------------------------ a plot (canvas)
  class Plot {
    constructor(panel, view) {
      this.p = panel;
      this.view = view;
      this.canvas = el("canvas", {dataset: {panel: panel.id}, "aria-label": panel.title});
      this.legend = el("div", {class: "legend"});
      this.values = panel.columns.map((name, j) => {
        const sw = el("i");
        sw.style.background = COLORS[j % COLORS.length];
        const v = el("b");
        const cmd = el("span", {class: "checks"});
        this.legend.append(el("span", {}, sw, `${name} `, v, " ", cmd));
        return [v, cmd];
      });
      const styles = panel.series.map((s) => `${s.label}${s.dashed ? " (dashed)" : ""}`).join(", ");
      this.root = el("div", {class: "plot"}, el("div", {class: "title"}, el("b", {text: panel.title}), el("span", {text: styles})), this.canvas, this.legend);
      let lo = Infinity, hi = -Infinity;
      for (const s of panel.series) for (const col of s.v) for (const x of col) if (x !== null) { if (x < lo) lo = x; if (x > hi) hi = x; }
      if (!(hi >= lo)) { lo = -1; hi = 1; }
      if (hi - lo < 1e-6) { lo -= 0.5; hi += 0.5; }
      const pad = (hi - lo) * 0.06;
      this.lo = lo - pad; this.hi = hi + pad;
      view.dragOn(this.canvas, (ev) => {
        const r = this.canvas.getBoundingClientRect();
        const w = r.width - GUTTER_L - GUTTER_R;
        return Math.round(Math.min(Math.max((ev.clientX - r.left - GUTTER_L) / w, 0), 1) * view.dur);
      });
    }

    resize() {
      const dpr = window.devicePixelRatio || 1, w = this.canvas.clientWidth, h = this.canvas.clientHeight;
      if (!w || !h) return;
      this.w = w; this.h = h; this.dpr = dpr;
      this.canvas.width = Math.round(w * dpr);
      this.canvas.height = Math.round(h * dpr);
      this.base = document.createElement("canvas");
      this.base.width = this.canvas.width;
      this.base.height = this.canvas.height;
      this.drawBase();
    }

    x(tS) { return GUTTER_L + (tS * 1e9 / this.view.dur) * (this.w - GUTTER_L - GUTTER_R); }
    y(v) { return 6 + (1 - (v - this.lo) / (this.hi - this.lo)) * (this.h - 24); }

    drawBase() {
      const g = this.base.getContext("2d"), w = this.w, h = this.h;
      g.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
      g.clearRect(0, 0, w, h);
      g.font = "11px system-ui, sans-serif";
      g.fillStyle = "#fafbfd";
      g.fillRect(GUTTER_L, 6, w - GUTTER_L - GUTTER_R, h - 24);
      // findings: bands behind the data
      for (const f of this.view.ep.findings) {
        g.fillStyle = f.level === "warn" ? "rgba(230,159,0,0.22)" : "rgba(198,40,40,0.18)";
        const x0 = this.x(f.t_ns / 1e9), x1 = f.end_ns !== null ? this.x(f.end_ns / 1e9) : x0;
        g.fillRect(x0 - 1, 6, Math.max(x1 - x0, 0) + 2, h - 24);
      }
      g.strokeStyle = "#e3e7ee"; g.fillStyle = "#5b6474"; g.lineWidth = 1;
      g.textAlign = "right"; g.textBaseline = "middle";
      for (const v of niceTicks(this.lo, this.hi, 4)) {
        const y = this.y(v);
        g.beginPath(); g.moveTo(GUTTER_L, y); g.lineTo(w - GUTTER_R, y); g.stroke();
        g.fillText(String(+v.toFixed(4)), GUTTER_L - 6, y);
      }
      g.textAlign = "center"; g.textBaseline = "top";
      for (const s of niceTicks(0, this.view.dur / 1e9, 10)) {
        const x = this.x(s);
        g.beginPath(); g.moveTo(x, 6); g.lineTo(x, h - 18); g.stroke();
        g.fillText(`${+s.toFixed(3)}`, x, h - 15);
      }
      g.save();
      g.beginPath(); g.rect(GUTTER_L, 6, w - GUTTER_L - GUTTER_R, h - 24); g.clip();
      for (const s of this.p.series) {
        g.setLineDash(s.dashed ? [5, 3] : []);
        g.lineWidth = s.dashed ? 1 : 1.3;
        s.v.forEach((col, j) => {
          const ts = s.t || s.tc[j];
          g.strokeStyle = COLORS[j % COLORS.length];
          g.globalAlpha = s.dashed ? 0.75 : 1;
          g.beginPath();
          let pen = false;
          for (let k = 0; k < col.length; k++) {
            const v = col[k];
            if (v === null) { pen = false; continue; }
            const x = this.x(ts[k]), y = this.y(v);
            if (pen) g.lineTo(x, y); else { g.moveTo(x, y); pen = true; }
          }
          g.stroke();
        });
      }
      g.restore();
      g.setLineDash([]); g.globalAlpha = 1;
    }

    render(t) {
      if (!this.base) return;
      const g = this.canvas.getContext("2d");
      g.setTransform(1, 0, 0, 1, 0, 0);
      g.clearRect(0, 0, this.canvas.width, this.canvas.height);
      g.drawImage(this.base, 0, 0);
      g.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
      const x = this.x(t / 1e9);
      g.strokeStyle = "#1d2330"; g.lineWidth = 1.5;
      g.beginPath(); g.moveTo(x, 2); g.lineTo(x, this.h - 18); g.stroke();
      // values at the cursor: the last sample at or before it
      const tS = t / 1e9;
      const obs = this.p.series.find((s) => !s.dashed), cmd = this.p.series.find((s) => s.dashed);
      this.values.forEach(([vEl, cEl], j) => {
        vEl.textContent = obs ? valueAt(obs, j, tS) : "";
        cEl.textContent = cmd ? `(cmd ${valueAt(cmd, j, tS)})` : "";
      });
    }
  }
  function valueAt(s, j, tS) {
    const ts = s.t || s.tc[j], k = lastAtOrBefore(ts, tS + 1e-9);
    const v = k < 0 ? null : s.v[j][k];
    return v === null || v === undefined ? "–" : v.toFixed(3);
  }

  init();
})();
