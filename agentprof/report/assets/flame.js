/* agentprof report: flame (icicle) view of sampled stacks, one per place (orchestration, parse, each tool).
   Reads the page's embedded data; draws nothing when the trace was not sampled. Text goes in via textContent. */
(function () {
  "use strict";
  var el = document.getElementById("agentprof-data");
  if (!el) return;
  var DATA = JSON.parse(el.textContent);
  var app = document.getElementById("app"), toc = document.getElementById("toc");
  if (!app) return;
  function mk(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmtS(s) { return s >= 1 ? s.toFixed(2) + " s" : (s * 1e3).toFixed(s >= 0.01 ? 0 : 1) + " ms"; }
  // one view per sampled trace: the page's, or each run's on a comparison page (placed before its footer)
  if (DATA.compare) {
    (DATA.compare.runs || []).forEach(function (r, i) {
      var host = document.getElementById("run" + i), F = (r.payload || {}).flame;
      if (host && F && F.places && F.places.length) view(F, host, host.querySelector(":scope > .foot"), "run" + i + "-flame", null);
    });
  } else if (DATA.flame && DATA.flame.places && DATA.flame.places.length) {
    view(DATA.flame, app, null, "flame", toc);
  }
  function view(F, host, before, id, tocBox) {
    var sec = mk("section", { class: "panel", id: id });
    sec.appendChild(mk("h2", null, "Where the loop and the tools spend their time (sampled stacks)"));
    sec.appendChild(mk("p", { class: "lede" }, "Stack samples per place: the agent's own loop (orchestration), " +
      "parsing, each tool. Width: sampled wall time; dark: on a CPU, medium: waiting for a CPU, light: I/O, sleep " +
      "or a child. Click a bar to zoom in, the top bar to zoom out. Function and file names only."));
    var pick = mk("select", { "aria-label": "place" });
    F.places.forEach(function (p, i) {
      pick.appendChild(mk("option", { value: String(i) }, p.where + " \u2014 " + fmtS(p.wall_s) + " sampled, " +
        fmtS(p.cpu_s) + " on CPU, " + fmtS(p.wait_s || 0) + " waiting for a CPU, " + p.samples + " samples"));
    });
    sec.appendChild(pick);
    var box = mk("div", { class: "flame", style: "position:relative;margin-top:8px;font:11px/16px ui-monospace,monospace;" });
    var info = mk("div", { class: "dim", style: "min-height:18px;margin-top:4px" });
    sec.appendChild(box);
    sec.appendChild(info);
    host.insertBefore(sec, before);
    if (tocBox) tocBox.appendChild(mk("a", { href: "#" + id }, "Sampled stacks"));
    var ROW = 18, place, focus;
    function label(node) {
      if (node[0] < 0) return place.where + " (all)";
      var fr = F.frames[node[0]] || ["?", ""];
      return fr[0];
    }
    function file(node) { return node[0] < 0 ? "" : (F.frames[node[0]] || ["", ""])[1]; }
    function draw() {
      box.textContent = "";
      var width = box.clientWidth || 900, rows = 0;
      function walk(node, x, w, depth, parents) {
        if (w < 1) return;
        rows = Math.max(rows, depth + 1);
        var cpu = node[1] > 0 ? Math.min(node[2] / node[1], 1) : 0;
        var busy = node[1] > 0 ? Math.min((node[2] + (node[4] || 0)) / node[1], 1) : 0;
        var pc = Math.round(cpu * 100), pb = Math.max(pc, Math.round(busy * 100));
        var bar = mk("div", { title: label(node) + "  " + file(node) + "\n" + fmtS(node[1]) + " sampled, " +
          fmtS(node[2]) + " on CPU (" + pc + " %), " + fmtS(node[4] || 0) + " waiting for a CPU" });
        bar.style.cssText = "position:absolute;box-sizing:border-box;overflow:hidden;white-space:nowrap;text-overflow:ellipsis;cursor:pointer;" +
          "border:1px solid #fff;border-radius:2px;padding:0 3px;color:#1b1b1b;left:" + x + "px;top:" + depth * ROW +
          "px;width:" + w + "px;height:" + ROW + "px;background:linear-gradient(90deg,hsl(24,85%,62%) " + pc +
          "%,hsl(32,85%,72%) " + pc + "%,hsl(32,85%,72%) " + pb + "%,hsl(40,80%,86%) " + pb + "%)";
        bar.textContent = w > 30 ? label(node) : "";
        bar.addEventListener("click", function () { focus = depth === 0 && parents.length ? parents[parents.length - 1] : node; draw(); });
        bar.addEventListener("mouseenter", function () { info.textContent = label(node) + " \u2014 " + file(node) + " \u2014 " + fmtS(node[1]) + " sampled, " + fmtS(node[2]) + " on CPU"; });
        box.appendChild(bar);
        var cx = x, kids = node[3] || [];
        for (var i = 0; i < kids.length; i++) {
          var kw = node[1] > 0 ? w * kids[i][1] / node[1] : 0;
          walk(kids[i], cx, kw, depth + 1, parents.concat([node]));
          cx += kw;
        }
      }
      var path = findPath(place.tree, focus) || [];
      walk(focus, 0, width, 0, path);
      box.style.height = (rows * ROW + 2) + "px";
    }
    function findPath(node, target) {
      if (node === target) return [];
      var kids = node[3] || [];
      for (var i = 0; i < kids.length; i++) {
        var p = findPath(kids[i], target);
        if (p) return [node].concat(p);
      }
      return null;
    }
    function show(i) { place = F.places[i]; focus = place.tree; draw(); }
    pick.addEventListener("change", function () { show(Number(pick.value)); });
    window.addEventListener("resize", function () { draw(); });
    show(0);
  }
})();
