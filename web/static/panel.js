// ipvsctl panel: the few things that need a script. Every page works without it.
// (1) the theme toggle, (2) live refresh of [data-poll] fragments every 2 s
// without a full reload, keeping checked boxes, (3) "select all" boxes,
// (4) in a check form, only the fields the chosen check type reads,
// (5) a [data-shown-by=ID] block only while checkbox ID is checked.
(function () {
  "use strict";
  var root = document.documentElement;
  var saved = null;
  try { saved = localStorage.getItem("ipvsctl-theme"); } catch (e) {}
  if (saved === "dark" || saved === "light") root.setAttribute("data-theme", saved);

  document.addEventListener("DOMContentLoaded", function () {
    var t = document.getElementById("theme-toggle");
    if (t) {
      t.hidden = false;
      t.addEventListener("click", function () {
        var dark = root.getAttribute("data-theme") === "dark" ||
          (!root.getAttribute("data-theme") && window.matchMedia("(prefers-color-scheme: dark)").matches);
        var next = dark ? "light" : "dark";
        root.setAttribute("data-theme", next);
        try { localStorage.setItem("ipvsctl-theme", next); } catch (e) {}
      });
    }
    document.querySelectorAll("[data-poll]").forEach(poll);
    document.querySelectorAll("fieldset.checkset").forEach(checkFields);
    document.querySelectorAll("[data-shown-by]").forEach(shownBy);
    document.addEventListener("change", function (ev) {
      var el = ev.target;
      if (el.matches && el.matches("input[data-select-all]")) {
        document.querySelectorAll("input[name='" + el.getAttribute("data-select-all") + "']").forEach(function (b) { b.checked = el.checked; });
      }
    });
  });

  // A row stays shown when it carries an error, and every row is shown when
  // the type says nothing (a typeless service check, or a server's
  // overrides with nothing to inherit): the server reads them all then.
  function checkFields(fs) {
    var sel = fs.querySelector("select[name=check_type]");
    if (!sel) return;
    var server = fs.hasAttribute("data-server");
    function show() {
      var t = sel.value || fs.getAttribute("data-inherit") || "";
      var all = t === "-" || (server && t === "");
      fs.querySelectorAll(".row[data-for]").forEach(function (row) {
        var on = all || row.getAttribute("data-for").split(" ").indexOf(t) >= 0 || !!row.querySelector(".fielderr");
        row.hidden = !on;
      });
    }
    sel.addEventListener("change", show);
    show();
  }

  // Shown while its checkbox is checked, and always when it carries an
  // error (the server read its fields).
  function shownBy(el) {
    var box = document.getElementById(el.getAttribute("data-shown-by"));
    if (!box) return;
    function show() { el.hidden = !box.checked && !el.querySelector(".fielderr"); }
    box.addEventListener("change", show);
    show();
  }

  function poll(el) {
    var url = el.getAttribute("data-poll");
    var busy = false;
    setInterval(function () {
      if (busy || document.hidden) return;
      busy = true;
      fetch(url, { headers: { "X-Fragment": "1" }, credentials: "same-origin" }).then(function (r) {
        if (!r.ok) throw new Error(r.status);
        return r.text();
      }).then(function (html) {
        var checked = {};
        el.querySelectorAll("input[type=checkbox]:checked").forEach(function (b) { checked[b.name + "\u0000" + b.value] = true; });
        el.innerHTML = html;
        el.querySelectorAll("input[type=checkbox]").forEach(function (b) { if (checked[b.name + "\u0000" + b.value]) b.checked = true; });
        el.removeAttribute("data-poll-error");
      }).catch(function () {
        el.setAttribute("data-poll-error", "1");
      }).then(function () { busy = false; });
    }, 2000);
  }
})();
