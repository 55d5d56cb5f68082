(function () {
"use strict";
var t0 = performance.now();
var D = JSON.parse(document.getElementById("casstore-data").textContent);
var DETAILS = null;  // one line of JSON per timeline row, split on first use
function details() { if (DETAILS === null) DETAILS = document.getElementById("casstore-details").textContent.split("\n"); return DETAILS; }
var RED = /\[REDACTED(?::[^\]]*)?\]/g;
function el(tag, cls, text) {
  var e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function add(parent) { for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]); return parent; }
function marked(tag, cls, s) {  // text with redacted values marked; never parsed as HTML
  var e = el(tag, cls); s = s === null || s === undefined ? "" : String(s);
  var last = 0, m; RED.lastIndex = 0;
  while ((m = RED.exec(s)) !== null) {
    e.appendChild(document.createTextNode(s.slice(last, m.index)));
    var mk = el("mark", "red", m[0]); mk.title = "redacted"; e.appendChild(mk); last = m.index + m[0].length;
  }
  e.appendChild(document.createTextNode(s.slice(last)));
  return e;
}
var LONG = 2000;  // characters of a string shown before a "show all" button
function leaf(v) {
  if (v === null) return el("span", "nul", "null");
  if (typeof v === "string" && v.length > LONG) {
    var box = el("span"), s = marked("span", "str", JSON.stringify(v.slice(0, LONG)).slice(0, -1) + "…");
    var rest = el("button", "rest", "show all " + v.length + " characters"); rest.type = "button";
    rest.addEventListener("click", function () { box.textContent = ""; add(box, marked("span", "str", JSON.stringify(v))); });
    return add(box, s, rest);
  }
  if (typeof v === "string") return marked("span", "str", JSON.stringify(v));
  if (typeof v === "number") return el("span", "n", String(v));
  if (typeof v === "boolean") return el("span", "b", String(v));
  return el("span", "", String(v));
}
function tree(v, label, open) {  // collapsible JSON; children built when first opened
  var isObj = v !== null && typeof v === "object";
  if (!isObj) { var line = el("div", "jl"); if (label !== null) add(line, el("span", "k", label + ": ")); return add(line, leaf(v)); }
  var keys = Array.isArray(v) ? v.map(function (_, i) { return i; }) : Object.keys(v);
  var d = el("details", "j"), s = el("summary");
  s.textContent = (label !== null ? label + ": " : "") + (Array.isArray(v) ? "[" + keys.length + "]" : "{" + keys.length + "}");
  d.appendChild(s);
  var built = false;
  function build() { if (built) return; built = true; keys.forEach(function (k) { d.appendChild(tree(v[k], Array.isArray(v) ? "[" + k + "]" : JSON.stringify(k), false)); }); }
  d.addEventListener("toggle", function () { if (d.open) build(); });
  if (open) { d.open = true; build(); }
  return d;
}
function flatten(v, out) {  // every key and value of a JSON value, as text
  if (v !== null && typeof v === "object") { Object.keys(v).forEach(function (k) { out.push(k); flatten(v[k], out); }); }
  else out.push(String(v));
  return out;
}
function kv(dl, k, v) { if (v === undefined || v === null || v === "") return; add(dl, el("dt", "", k), marked("dd", "", v)); }
function size(n) { if (n === null || n === undefined) return ""; var u = ["B", "KiB", "MiB", "GiB"], i = 0; while (n >= 1024 && i < 3) { n /= 1024; i++; } return (i ? n.toFixed(1) : n) + " " + u[i]; }
function ageClass(age) { var L = D.limits || {}; if (age === null || age === undefined) return ""; return age > L.max_age_days ? "stale" : age > L.warn_age_days ? "warn" : ""; }
function statusClass(s) { return typeof s === "number" ? "s" + String(s).charAt(0) : s === "error" ? "serr" : "s2"; }
function trustBadge(trusted, signers, short) {  // short: "trusted", the keys in its title
  var yes = !!(trusted && trusted.length), long = yes ? "trusted: " + trusted.join(", ") : (signers && signers.length ? "not trusted" : "unsigned");
  var b = el("span", "badge " + (yes ? "ok" : "bad"), short && yes ? "trusted" : long);
  if (short && yes) b.title = long;
  b.setAttribute("data-trusted", yes ? "yes" : "no"); return b;
}
var filterBox = document.getElementById("filter");
var filters = [];
filterBox.addEventListener("input", function () { var q = filterBox.value.toLowerCase(); filters.forEach(function (f) { f(q); }); });

function convoView(c, req) {
  var box = el("div", "convo"), body = req && req.body, msgs = null;
  if (typeof body === "string") { try { body = JSON.parse(body); } catch (err) { body = null; } }
  if (body && typeof body === "object") msgs = body.messages !== undefined && body.messages !== null ? body.messages : body.input;
  var answer = c.answer === undefined ? null : c.answer;
  if (c.chunks) { var parts = c.chunks.filter(function (ch) { return ch[1] !== null; }); answer = parts.length ? parts.map(function (ch) { return ch[1]; }).join("") : null; }
  add(box, el("div", "role", "model " + (c.model || "?") + (c.tools && c.tools.length ? " · tools: " + c.tools.join(", ") : "")));
  c.turns.forEach(function (t) {
    var turn = el("div", "turn"); turn.setAttribute("data-role", t.role);
    add(turn, el("div", "role", t.role + (t.tool_call_id ? " · result of " + t.tool_call_id : "")));
    var text = t.m !== undefined ? msgs[t.m].content : t.text;  // m: the request's message holds the text
    if (text) add(turn, marked("pre", "text", text));
    (t.tool_calls || []).forEach(function (tc) { add(turn, toolCall(tc)); });
    box.appendChild(turn);
  });
  if (answer !== null || c.answer_tool_calls) {
    var ans = el("div", "turn answer"); ans.setAttribute("data-role", "assistant");
    add(ans, el("div", "role", "assistant (recorded answer)"));
    if (answer !== null) add(ans, marked("pre", "text", answer));
    (c.answer_tool_calls || []).forEach(function (tc) { add(ans, toolCall(tc)); });
    box.appendChild(ans);
  }
  if (c.chunks) {
    var d = el("details", "j"); add(d, el("summary", "", c.chunks.length + " streamed chunk(s)"));
    var tb = el("table", "chunks"); add(tb, add(el("tr"), el("th", "", "#"), el("th", "", "at ms"), el("th", "", "text")));
    c.chunks.forEach(function (ch, i) { add(tb, add(el("tr"), el("td", "num", i), el("td", "num", ch[0] === null ? "" : ch[0]), marked("td", "", ch[1]))); });
    box.appendChild(add(d, tb));
  }
  if (c.usage) add(box, el("div", "usage mono", "usage: " + c.usage[0] + " in + " + c.usage[1] + " out = " + (c.usage[0] + c.usage[1]) + " tokens"));
  return box;
}
function toolCall(tc) {
  var b = el("div", "toolcall"); add(b, el("span", "role", "tool call "), el("b", "tname", tc.name || "?"), el("span", "mono", tc.id ? "  " + tc.id : ""));
  var args = tc.arguments;
  if (typeof args === "string") { try { args = JSON.stringify(JSON.parse(args), null, 2); } catch (e) { /* shown as recorded */ } }
  else args = JSON.stringify(args, null, 2);
  return add(b, marked("pre", "args", args));
}
function detail(row) {
  var r = JSON.parse(details()[row.di]);  // the row's detail, parsed when it is opened
  var td = el("td", "detail"); td.colSpan = 8;
  var e = Object.assign({identity: row.identity, kind: row.kind}, r.entry);  // the row holds these
  if (r.target === undefined) e.target = row.what; else if (r.target !== 0) e.target = r.target;  // 0: the entry has none
  if (r.convo) add(td, convoView(r.convo, e.request));
  ["request", "response"].forEach(function (k) {
    var x = r.decoded && r.decoded[k], rec = e[k] || {};
    if (x) {
      add(td, el("div", "role", k + " body, decoded" + (x.note ? " (" + x.note + ")" : "")));
      if (x.text !== null) add(td, marked("pre", "decoded", x.text));
      return;
    }
    var text = typeof rec.body_text === "string" ? rec.body_text : typeof rec.body === "string" ? rec.body : null;
    if (text === null || text === "") return;  // a JSON body is in the tree below
    var label = k + " body, text";
    try { text = JSON.stringify(JSON.parse(text), null, 2); label = k + " body, JSON indented"; } catch (err) { /* shown as recorded */ }
    add(td, el("div", "role", label + " (" + text.length + " characters)"), marked("pre", "plain", text));
  });
  add(td, tree(e.request, "request", true), tree(e.response, "response", true));
  var rest = {}; Object.keys(e).forEach(function (k) { if (k !== "request" && k !== "response") rest[k] = e[k]; });
  add(td, tree(rest, "entry", false));
  return td;
}
function timeline(cas, host) {
  var F = D.row_fields, V = D.row_values, at = cas.detail_at, n = cas.rows.length, made = [];
  function row(i) {  // a row's fields by name, made when first needed
    if (made[i]) return made[i];
    var a = cas.rows[i], r = {di: at + i}; F.forEach(function (f, j) { r[f] = V[f] ? V[f][a[j]] : a[j]; });
    return (made[i] = r);
  }
  if (!n) { add(host, el("div", "role empty", "no entries: this cassette is empty")); return; }
  var all = [], shown, limit = 0, STEP = 200;
  for (var i = 0; i < n; i++) all.push(i);
  shown = all;
  var table = el("table", "timeline");
  add(table, add(el("thead"), add(el("tr"), el("th", "", "#"), el("th", "", "kind"), el("th", "", "call"), el("th", "", "status"),
    el("th", "", "ms"), el("th", "", "ttfb ms"), el("th", "", "identity"), el("th", "", "model / answer"))));
  var body = el("tbody"); table.appendChild(body);
  var more = el("button", "more"); more.type = "button";
  var count = el("div", "role");
  function rowEl(r) {
    var tr = el("tr", "row"); tr.setAttribute("data-seq", r.seq); tr.setAttribute("data-kind", r.kind);
    var what = add(el("td", "what"), marked("div", "clamp", r.what)), hint = add(el("td"), marked("div", "clamp", r.hint));
    what.title = r.what; hint.title = r.hint;  // the whole text on hover (a title is text, never markup)
    add(tr, el("td", "num", r.seq), el("td", "nw", r.kind + (r.stream ? " ⇶" : "")), what,
      el("td", "status " + statusClass(r.status), r.status), el("td", "num", r.ms), el("td", "num", r.ttfb), el("td", "mono nw", r.identity.slice(0, 12)), hint);
    var open = null;
    tr.tabIndex = 0; tr.setAttribute("aria-expanded", "false");  // opened by click, Enter or Space
    function toggle() {
      if (open) { open.remove(); open = null; } else { open = add(el("tr", "detailrow"), detail(r)); tr.after(open); }
      tr.setAttribute("aria-expanded", open ? "true" : "false");
    }
    tr.addEventListener("click", toggle);
    tr.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); toggle(); } });
    return tr;
  }
  function render(upTo) {
    for (var i = limit; i < Math.min(upTo, shown.length); i++) body.appendChild(rowEl(row(shown[i])));
    limit = Math.min(upTo, shown.length);
    more.textContent = "show " + Math.min(STEP * 5, shown.length - limit) + " more of " + (shown.length - limit);
    more.classList.toggle("hidden", limit >= shown.length);
    count.textContent = shown.length + " of " + n + " entries";
  }
  more.addEventListener("click", function () { render(limit + STEP * 5); });
  var text = null;
  filters.push(function (q) {
    if (text === null) text = all.map(function (i) {  // the text as shown, not as escaped in JSON
      var r = row(i), out = [r.seq, r.kind, r.what, r.status, r.identity, r.hint];
      flatten(JSON.parse(details()[r.di]), out); return out.join("\n").toLowerCase();
    });
    shown = q ? all.filter(function (i) { return text[i].indexOf(q) >= 0; }) : all;
    body.textContent = ""; limit = 0; render(STEP);
  });
  add(host, count, table, more);
  render(STEP);
}
function obj(v) { return v !== null && typeof v === "object" && !Array.isArray(v) ? v : {}; }
function provenance(dl, m) {  // meta as the recorder writes it: where, on what, with what
  var g = obj(m.git), pl = obj(m.platform), pk = obj(m.packages);
  kv(dl, "git", [g.commit ? String(g.commit).slice(0, 12) : "", g.branch ? "on " + g.branch : "", g.dirty ? "(uncommitted changes)" : ""].filter(Boolean).join(" "));
  kv(dl, "platform", [pl.implementation, pl.python, pl.os ? "on " + pl.os : "", pl.arch].filter(Boolean).join(" "));
  kv(dl, "packages", Object.keys(pk).map(function (k) { return k + " " + pk[k]; }).join(", "));
  kv(dl, "fingerprint", typeof m.fingerprint === "string" ? m.fingerprint : "");
  kv(dl, "test file", typeof m.test_file === "string" ? m.test_file : "");
}
function cassettePage() {
  D.cassettes.forEach(function (c) {
    var s = el("section", "cassette"); s.setAttribute("data-name", c.name);
    add(s, add(el("h2"), el("span", "", c.name + " "), trustBadge(c.trusted, c.signers)));
    var dl = el("dl", "head");
    kv(dl, "digest", c.digest); kv(dl, "size", size(c.size)); kv(dl, "signers", (c.signers || []).join(", ") || "unsigned");
    kv(dl, "recorded", (c.recorded_from || "?") + " .. " + (c.recorded_to || "?"));
    if (c.age_days !== null) { kv(dl, "age", c.age_days + " days (warn after " + D.limits.warn_age_days + ", stale after " + D.limits.max_age_days + ")"); dl.lastChild.className = ageClass(c.age_days); }
    kv(dl, "models", (c.models || []).join(", "));
    var m = c.meta || {};
    kv(dl, "recorder", m.recorder);
    provenance(dl, m);
    var red = c.redaction || {}, hits = Object.keys(red.hits || {}).map(function (k) { return k + " ×" + red.hits[k]; });
    kv(dl, "redaction rules", (red.rules || []).map(function (r) { return typeof r === "string" ? r : JSON.stringify(r); }).join(", ") || "built-in");
    kv(dl, "redaction hits", hits.join(", ") || "none");
    var re = Object.keys(c.rehits || {}); if (re.length) kv(dl, "redacted on display", re.map(function (k) { return k + " ×" + c.rehits[k]; }).join(", "));
    add(s, dl, tree(m, "meta (provenance, fingerprint)", false));
    timeline(c, s);
    document.getElementById("main").appendChild(s);
  });
}
function indexPage() {
  var t = el("table", "index");
  add(t, add(el("tr"), el("th", "", "cassette"), el("th", "", "entries"), el("th", "", "models"), el("th", "", "recorded"),
    el("th", "", "age (days)"), el("th", "", "size"), el("th", "", "signed by"), el("th", "", "used by"), el("th", "", "digest")));
  var trs = D.pins.map(function (p) {
    var tr = el("tr", "pin"); tr.setAttribute("data-name", p.name);
    var sig = el("td"), badge = trustBadge(p.trusted, p.signers, true);
    if (p.trust_error) badge.title = p.trust_error;  // why the signature does not verify (title: text only)
    add(sig, el("span", "", (p.signers || []).join(", ") + " "), badge);
    var models = el("td");  // a model name never breaks; the list does, after a comma
    (p.models || []).forEach(function (m, i) { if (i) models.appendChild(document.createTextNode(", ")); add(models, marked("span", "nw", m)); });
    var from = (p.recorded_from || "?").slice(0, 10), to = (p.recorded_to || "?").slice(0, 10);
    var rec = marked("td", "nw", from + (to !== from ? " .. " + to : ""));  // days; the times on hover
    rec.title = (p.recorded_from || "?") + " .. " + (p.recorded_to || "?");
    add(tr, marked("td", "mono", p.name), el("td", "num", p.entries), models, rec, el("td", "num " + ageClass(p.age_days), p.age_days),
      el("td", "num", size(p.size)), sig,
      p.used_by ? marked("td", "mono used", p.used_by) : marked("td", "used mute", p.used_by_unknown),
      el("td", "mono digest", (p.digest || "").slice(0, 19)));
    t.appendChild(tr); return tr;
  });
  filters.push(function (q) { D.pins.forEach(function (p, i) { trs[i].classList.toggle("hidden", !!q && flatten(p, []).join("\n").toLowerCase().indexOf(q) < 0); }); });
  add(document.getElementById("main"), el("div", "role", D.pins.length + " pinned cassette(s); `casstore view NAME` shows one"), t);
}
function diffPage() {
  var main = document.getElementById("main");
  add(main, el("h2", "", "recorded calls: " + D.old + " → " + D.new + " · " + D.cassettes.length + " cassette(s) changed, " + D.unchanged + " unchanged"));
  (D.trust || []).forEach(function (t) { add(main, marked("div", "trust badge bad", "trusted keys: " + t.change + " " + t.keyid + " " + (t.identity || ""))); });
  var sections = D.cassettes.map(function (c) {
    var s = el("section", "change c-" + c.status); s.setAttribute("data-name", c.name); s.setAttribute("data-status", c.status);
    add(s, add(el("h2"), el("span", "", c.status + " · "), marked("span", "mono", c.name)));
    var dl = el("dl", "head");
    kv(dl, "digest", (c.old_digest || "-").slice(0, 19) + " → " + (c.new_digest || "-").slice(0, 19));
    kv(dl, "entries", (c.old_entries === null ? "-" : c.old_entries) + " → " + (c.new_entries === null ? "-" : c.new_entries) + " (" + c.unchanged + " unchanged)");
    if (JSON.stringify(c.old_models) !== JSON.stringify(c.new_models)) kv(dl, "models", (c.old_models.join(", ") || "-") + " → " + (c.new_models.join(", ") || "-"));
    if (JSON.stringify(c.old_signers) !== JSON.stringify(c.new_signers)) kv(dl, "signers", (c.old_signers.join(", ") || "-") + " → " + (c.new_signers.join(", ") || "-"));
    kv(dl, "not compared", c.error);
    s.appendChild(dl);
    c.calls.forEach(function (x) {
      var d = el("div", "call c-" + x.change); d.setAttribute("data-change", x.change); d.setAttribute("data-seq", x.seq);
      add(d, marked("div", "mono", x.change + " #" + x.seq + " " + x.summary));
      if (x.pairs) {
        var t = el("table", "pairs"); add(t, add(el("tr"), el("th", "", "field"), el("th", "", D.old), el("th", "", D.new)));
        x.pairs.forEach(function (p) {
          var tr = el("tr", "pair"); tr.setAttribute("data-path", p.path);
          add(tr, marked("td", "path", p.path), marked("td", "old", p.old === null ? "(absent)" : p.old), marked("td", "new", p.new === null ? "(absent)" : p.new));
          t.appendChild(tr);
        });
        d.appendChild(t);
      } else x.fields.forEach(function (f) { add(d, marked("div", "mono", "  " + f)); });
      s.appendChild(d);
    });
    main.appendChild(s); return s;
  });
  filters.push(function (q) { D.cassettes.forEach(function (c, i) { sections[i].classList.toggle("hidden", !!q && flatten(c, []).join("\n").toLowerCase().indexOf(q) < 0); }); });
}
({"index": indexPage, "cassettes": cassettePage, "diff": diffPage})[D.page]();
document.documentElement.setAttribute("data-render-ms", String(Math.round(performance.now() - t0)));
document.documentElement.setAttribute("data-ready", "1");
})();
