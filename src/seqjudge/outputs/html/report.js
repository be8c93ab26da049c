/* seqjudge report: sort and filter the traces table, show one trace in the side panel.
   Trace data is untrusted: it is only ever put into the page as text (textContent / createTextNode),
   never parsed as HTML. No library, no network. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("seqjudge-data").textContent);
  var table = document.getElementById("traces-table");
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var byId = Object.create(null);
  data.traces.forEach(function (t, i) { byId[t.id] = i; });
  var WINDOW = 4, LONG = 60;

  // -- building blocks: elements whose content is text, never HTML --
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined) continue;
      parent.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return parent;
  }
  function badge(verdict) { return el("span", "badge v-" + verdict, verdict); }
  function fmt(x, digits) { return x === null || x === undefined ? "–" : Number(x).toFixed(digits); }
  function signed(x) { return (x > 0 ? "+" : x < 0 ? "−" : "±") + Math.abs(x).toFixed(2); }

  // -- filtering --
  var fVerdict = document.getElementById("f-verdict");
  var fText = document.getElementById("f-text");
  var fChanged = document.getElementById("f-changed");
  var shown = document.getElementById("shown");
  var noMatch = document.getElementById("no-match");
  function applyFilter() {
    var verdict = fVerdict.value, query = fText.value.trim().toLowerCase();
    var changed = fChanged ? fChanged.checked : false, count = 0;
    rows.forEach(function (tr) {
      var ok = (verdict === "all" || tr.getAttribute("data-verdict") === verdict) &&
        (!query || tr.getAttribute("data-search").indexOf(query) !== -1) &&
        (!changed || tr.getAttribute("data-changed") === "1");
      tr.hidden = !ok;
      if (ok) count++;
    });
    shown.textContent = count + " of " + rows.length + " traces";
    noMatch.hidden = count > 0;
  }
  fVerdict.addEventListener("change", applyFilter);
  fText.addEventListener("input", applyFilter);
  if (fChanged) fChanged.addEventListener("change", applyFilter);

  // -- sorting: click a header; again to reverse. Ties keep the run's order. --
  var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
  headers.forEach(function (th, col) {
    th.querySelector("button").addEventListener("click", function () {
      var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
      headers.forEach(function (h) { h.setAttribute("aria-sort", "none"); });
      th.setAttribute("aria-sort", dir);
      var numeric = th.getAttribute("data-type") === "num", sign = dir === "ascending" ? 1 : -1;
      var keyed = rows.map(function (tr) {
        var raw = tr.cells[col].getAttribute("data-sort") || "";
        return { tr: tr, key: numeric ? parseFloat(raw) : raw.toLowerCase(), i: +tr.getAttribute("data-i") };
      });
      keyed.sort(function (a, b) {
        if (a.key < b.key) return -sign;
        if (a.key > b.key) return sign;
        return a.i - b.i;
      });
      keyed.forEach(function (k) { tbody.appendChild(k.tr); });
    });
  });

  // -- the trace panel --
  var drawer = document.getElementById("detail");
  var body = document.getElementById("d-body");
  var title = document.getElementById("d-title");
  var current = null;

  function markSets(t) {
    var engine = {}, judge = {};
    t.marks.forEach(function (m) {
      if (m.call === null || m.call === undefined) return;
      var into = m.source === "engine" ? engine : judge;
      (into[m.call] = into[m.call] || []).push(m);
    });
    return { engine: engine, judge: judge };
  }

  function violations(t) {
    var box = el("section", "d-viol");
    add(box, el("h3", null, "Violations"));
    if (!t.marks.length) {
      add(box, el("p", "empty-note", "Neither the engine nor the judge reported a violation."));
      return box;
    }
    var list = el("ul", "viol");
    t.marks.forEach(function (m) {
      var li = el("li", m.source);
      var head = el("div", "vhead");
      add(head, el("span", "badge src-" + m.source, m.source), el("code", null, m.rule),
        el("span", "badge neutral", m.severity), el("span", "vmeta", m.type),
        el("span", "vmeta", m.call === null || m.call === undefined ? "at no single call" : "at call " + (m.call + 1)));
      add(li, head, el("p", "vwhy", m.explanation));
      if (m.expected || m.actual) add(li, el("p", "vmeta", "Expected: " + m.expected + " · Actual: " + m.actual));
      if (m.suggestion) add(li, el("p", "vmeta", "Suggestion: " + m.suggestion));
      add(list, li);
    });
    return add(box, list);
  }

  function visibleCalls(t, marks, all) {
    var n = t.calls.length, keep = {};
    if (all || n <= LONG) { for (var i = 0; i < n; i++) keep[i] = true; return keep; }
    var marked = Object.keys(marks.engine).concat(Object.keys(marks.judge)).map(Number);
    if (!marked.length) { for (var j = 0; j < LONG; j++) keep[j] = true; return keep; }
    marked.forEach(function (m) {
      for (var k = Math.max(0, m - WINDOW); k <= Math.min(n - 1, m + WINDOW); k++) keep[k] = true;
    });
    keep[0] = true; keep[n - 1] = true;
    return keep;
  }

  function callItem(t, i, marks) {
    var c = t.calls[i], e = marks.engine[i] || [], j = marks.judge[i] || [];
    var cls = "call" + (e.length || j.length ? " marked" : "") + (!e.length && j.length ? " judge-only" : "");
    var li = el("li", cls);
    li.id = "call-" + i;
    add(li, el("span", "cnum", (i + 1) + "."), el("code", "tool", c.tool));
    if (c.args) add(li, " ", el("span", "args mono", c.args));
    if (c.parallel) add(li, el("span", "step", "step " + c.step + " ∥"));
    if (c.status === "error") add(li, " ", el("span", "badge v-fail", "error"));
    if (e.length || j.length) {
      var box = el("div", "marks");
      e.forEach(function (m) { add(box, el("span", "mark engine", "← engine: " + m.rule + " (" + m.type + ")")); });
      j.forEach(function (m) { add(box, el("span", "mark judge", "← judge: " + m.rule + " (" + m.type + ")")); });
      add(li, box);
    }
    if (c.error) add(li, el("div", "io error", "error: " + c.error));
    if (c.output) add(li, el("div", "io", "→ " + c.output));
    return li;
  }

  function timeline(t, all) {
    var box = el("section", "d-timeline");
    var marks = markSets(t), n = t.calls.length;
    add(box, el("h3", null, "Timeline (" + n + " call" + (n === 1 ? "" : "s") + ")"));
    if (!n) { add(box, el("p", "empty-note", "The trace has no calls.")); return box; }
    var strip = el("div", "strip");
    strip.setAttribute("aria-label", "Calls at a glance: red = engine violation, purple = judge violation");
    for (var s = 0; s < Math.min(n, 1500); s++) {
      var e = marks.engine[s], j = marks.judge[s];
      var b = el("button", (e && j ? "m-both" : e ? "m-engine" : j ? "m-judge" : "") + (t.calls[s].status === "error" ? " err" : ""));
      b.type = "button";
      b.title = (s + 1) + ". " + t.calls[s].tool + (e || j ? " (violation)" : "");
      b.setAttribute("aria-label", b.title);
      b.setAttribute("data-call", String(s));
      add(strip, b);
    }
    strip.addEventListener("click", function (ev) {
      var target = ev.target.closest("button[data-call]");
      if (!target) return;
      var at = +target.getAttribute("data-call");
      if (!document.getElementById("call-" + at)) renderTrace(current, true);
      var item = document.getElementById("call-" + at);
      item.scrollIntoView({ block: "center" });
      item.classList.add("flash");
      setTimeout(function () { item.classList.remove("flash"); }, 1200);
    });
    add(box, strip);
    var keep = visibleCalls(t, marks, all);
    var byAt = {}, loose = [];
    t.messages.forEach(function (m) {
      if (m.at === null || m.at === undefined) loose.push(m); else (byAt[m.at] = byAt[m.at] || []).push(m);
    });
    var list = el("ol", "timeline");
    function messages(at) {
      (byAt[at] || []).forEach(function (m) { add(list, el("li", "msg", m.role + ": " + (m.content || ""))); });
    }
    var hidden = 0;
    for (var i = 0; i < n; i++) {
      if (!keep[i]) { hidden++; continue; }
      if (hidden) { add(list, gap(hidden)); hidden = 0; }
      messages(i);
      add(list, callItem(t, i, marks));
    }
    if (hidden) add(list, gap(hidden));
    messages(n);
    loose.forEach(function (m) { add(list, el("li", "msg", m.role + " (position unknown): " + (m.content || ""))); });
    return add(box, list);
  }

  function gap(count) {
    var li = el("li", "gap"), b = el("button", null, "… " + count + " more call" + (count === 1 ? "" : "s") + " (show all)");
    b.type = "button";
    b.addEventListener("click", function () { renderTrace(current, true); });
    return add(li, b);
  }

  function rulesTable(t) {
    var box = el("section", "d-rules");
    add(box, el("h3", null, "Rules: engine and judge"));
    if (!t.rules.length) { add(box, el("p", "empty-note", "No rule applied.")); return box; }
    var tbl = el("table", "rules small"), head = el("tr");
    ["Rule", "Type", "Severity", "Engine", "Judge", "Final", "Agree"].forEach(function (h) {
      var th = el("th", null, h); th.scope = "col"; add(head, th);
    });
    add(tbl, add(el("thead"), head));
    var tb = el("tbody");
    t.rules.forEach(function (r) {
      var tr = el("tr");
      add(tr, add(el("td"), el("code", null, r.id)), el("td", null, r.type), el("td", null, r.severity),
        el("td", "o-" + r.engine, r.engine), el("td", r.judge ? "o-" + r.judge : "o-deferred", r.judge || "–"),
        el("td", "o-" + r.final, r.final),
        el("td", r.agree === false ? "agree-no" : null, r.agree === null || r.agree === undefined ? "" : r.agree ? "yes" : "NO"));
      add(tb, tr);
      var ex = el("tr"), cell = el("td", "expl");
      cell.colSpan = 7;
      add(cell, el("b", null, "Engine: "), r.engine_explanation || "–");
      if (r.judge_explanation) add(cell, el("br"), el("b", null, "Judge: "), r.judge_explanation);
      add(tb, add(ex, cell));
    });
    return add(box, add(tbl, tb));
  }

  function judgeBox(t) {
    var j = t.judge, box = el("section", "d-judge");
    add(box, el("h3", null, "Judge"));
    if (j.status === "skipped") {
      add(box, el("p", "note", "The judge did not run" + (j.reason ? ": " + j.reason : ".")));
    } else {
      add(box, el("p", null, j.status + " by " + j.model + (j.score !== null && j.score !== undefined ? ", score " + fmt(j.score, 2) : "") +
        " (" + j.attempts + " attempt" + (j.attempts === 1 ? "" : "s") + ")"));
      if (j.reason) add(box, el("p", "note", j.reason));
      if (j.summary) add(box, el("p", null, j.summary));
    }
    add(box, el("h3", null, "Engine"), el("p", null, t.engine_summary || "–"));
    return box;
  }

  function renderTrace(i, all) {
    var t = data.traces[i];
    current = i;
    title.textContent = t.id;
    body.textContent = "";
    var sum = el("div", "d-sum");
    add(sum, badge(t.verdict), el("span", null, "score " + fmt(t.score, 2)),
      el("span", "note", t.marks.filter(function (m) { return m.source === "engine"; }).length + " engine / " +
        t.marks.filter(function (m) { return m.source === "judge"; }).length + " judge violation(s)"));
    add(body, sum);
    if (t.reasons.length) add(body, el("p", "note", "Sent to review: " + t.reasons.join(", ")));
    if (t.delta) {
      var d = t.delta, rank = { pass: 0, review: 1, fail: 2 };
      var change = rank[d.after] > rank[d.before] ? "worse" : rank[d.after] < rank[d.before] ? "better" : "";
      var box = el("div", "d-box " + change);
      add(box, "Against the baseline: ", badge(d.before), " → ", badge(d.after),
        ", score " + fmt(d.before_score, 2) + " → " + fmt(t.score, 2) + " (" + signed(d.score_delta) + ")");
      if (d.new.length) add(box, el("br"), "New violations: " + d.new.join(", "));
      if (d.fixed.length) add(box, el("br"), "Fixed: " + d.fixed.join(", "));
      add(body, box);
    } else if (data.compare) {
      add(body, el("div", "d-box", "Not in the baseline."));
    }
    add(body, violations(t), timeline(t, !!all), rulesTable(t), judgeBox(t));
    rows.forEach(function (tr) { tr.classList.toggle("selected", +tr.getAttribute("data-i") === i); });
  }

  function openTrace(i) {
    renderTrace(i, false);
    drawer.hidden = false;
    drawer.scrollTop = 0;
    if (history.replaceState) history.replaceState(null, "", "#trace=" + encodeURIComponent(data.traces[i].id));
    document.getElementById("d-close").focus();
  }
  function closeTrace() {
    drawer.hidden = true;
    rows.forEach(function (tr) { tr.classList.remove("selected"); });
    if (history.replaceState) history.replaceState(null, "", location.pathname + location.search);
    var row = current === null ? null : tbody.querySelector('tr[data-i="' + current + '"] button');
    if (row) row.focus();
  }

  tbody.addEventListener("click", function (ev) {
    var tr = ev.target.closest("tr[data-i]");
    if (tr) openTrace(+tr.getAttribute("data-i"));
  });
  document.addEventListener("click", function (ev) {
    var link = ev.target.closest("[data-open-id]");
    if (link && link.getAttribute("data-open-id") in byId) openTrace(byId[link.getAttribute("data-open-id")]);
  });
  document.getElementById("d-close").addEventListener("click", closeTrace);
  document.addEventListener("keydown", function (ev) { if (ev.key === "Escape" && !drawer.hidden) closeTrace(); });

  // A link to one trace (#trace=ID) opens it.
  var m = /^#trace=(.*)$/.exec(location.hash);
  if (m) {
    var id = decodeURIComponent(m[1]);
    if (id in byId) openTrace(byId[id]);
  }
  applyFilter();
})();
