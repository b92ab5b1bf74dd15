// approvals dashboard: the only script of ours. The Content-Security-Policy
// allows no inline script, so every behaviour is wired here from data-*
// attributes rendered by the server.
(function () {
  "use strict";

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  // Every htmx request carries the CSRF token as a header.
  document.addEventListener("htmx:configRequest", function (e) {
    e.detail.headers["X-CSRF-Token"] = csrfToken();
  });

  // After a swap, move focus to what the server marked (a result or an
  // error), so keyboard and screen reader users hear what happened. A live
  // reload of the queue keeps the selection and never steals focus.
  document.addEventListener("htmx:afterSwap", function (e) {
    var target = e.detail.target;
    if (target && target.id === "queue") {
      restoreSelection();
      restoreChecked();
      return;
    }
    var root = target && target.isConnected ? target : document;
    var focus = root.querySelector("[data-autofocus]");
    if (focus) focus.focus();
  });

  // --- Live queue: server-sent events trigger a reload of the fragment. ---
  var live = document.querySelector("[data-live]");
  var liveStatus = document.getElementById("live-status");
  var reloadTimer = null;

  function setLive(text, ok) {
    if (!liveStatus) return;
    liveStatus.textContent = text;
    liveStatus.classList.toggle("live-ok", ok);
    liveStatus.classList.toggle("live-off", !ok);
  }

  function reloadQueue() {
    reloadTimer = null;
    var queue = document.getElementById("queue");
    if (!queue || !window.htmx) return;
    window.htmx.ajax("GET", queue.getAttribute("data-src"), { target: "#queue", swap: "outerHTML" });
  }

  function scheduleReload() {
    if (reloadTimer === null) {
      reloadTimer = window.setTimeout(reloadQueue, 100);
    }
  }

  if (live && window.EventSource) {
    var source = new EventSource(live.getAttribute("data-live"));
    source.addEventListener("open", function () { setLive("Live", true); });
    source.addEventListener("error", function () {
      setLive(source.readyState === EventSource.CLOSED ? "Offline: reload the page" : "Reconnecting…", false);
    });
    source.addEventListener("change", function (e) {
      var change = {};
      try { change = JSON.parse(e.data); } catch (err) { return; }
      // The queue lists pending actions: reload it for a new pending
      // action (announced with or without its id) or a change to one of
      // its rows, not for every claim and completion of other tools.
      var queue = document.getElementById("queue");
      if (queue && (change.state === "pending" ||
          queue.querySelector('[data-row-link="' + CSS.escape(change.id || "") + '"]'))) {
        scheduleReload();
      }
      var action = document.querySelector("[data-action-id]");
      if (action && action.getAttribute("data-action-id") === change.id &&
          action.getAttribute("data-state") !== change.state) {
        var notice = document.getElementById("stale-notice");
        if (notice) notice.hidden = false;
      }
    });
    // Ages and times to expiry are rendered by the server; refresh them.
    if (document.getElementById("queue")) {
      window.setInterval(scheduleReload, 30000);
    }
  }

  // --- Keyboard shortcuts. ---
  var selectedID = null;

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("#queue [data-row-link]"));
  }

  function select(link) {
    rows().forEach(function (r) { r.closest("tr").classList.remove("selected"); });
    if (!link) return;
    link.closest("tr").classList.add("selected");
    selectedID = link.getAttribute("data-row-link");
    link.focus();
  }

  function selectedLink() {
    return selectedID === null ? null : document.querySelector('#queue [data-row-link="' + CSS.escape(selectedID) + '"]');
  }

  function restoreSelection() {
    var link = selectedLink();
    if (!link) return;
    link.closest("tr").classList.add("selected");
    // The reload replaced the focused row: focus its successor.
    if (document.activeElement === document.body || document.activeElement === null) {
      link.focus({ preventScroll: true });
    }
  }

  function move(delta) {
    var list = rows();
    if (list.length > 0) {
      var i = list.indexOf(document.activeElement);
      if (i < 0) i = list.indexOf(selectedLink());
      if (i < 0) {
        i = delta > 0 ? 0 : list.length - 1;
      } else {
        i = Math.max(0, Math.min(list.length - 1, i + delta));
      }
      select(list[i]);
      return;
    }
    // On an action page, j and k walk the queue.
    var nav = document.querySelector(delta > 0 ? "[data-nav=next]" : "[data-nav=prev]");
    if (nav) window.location.href = nav.getAttribute("href");
  }

  function focusField(id) {
    var el = document.getElementById(id);
    if (!el) return false;
    var details = el.closest("details");
    if (details) details.open = true;
    el.focus();
    el.scrollIntoView({ block: "center" });
    return true;
  }

  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.altKey || e.metaKey || e.ctrlKey) {
      // Ctrl/Cmd+Enter submits the form of the focused text area.
      if ((e.ctrlKey || e.metaKey) && e.key === "Enter" && e.target.form) {
        e.preventDefault();
        e.target.form.requestSubmit();
      }
      return;
    }
    var t = e.target;
    if (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)) {
      if (e.key === "Escape") t.blur();
      return;
    }
    switch (e.key) {
      case "x": if (!toggleFocusedRow()) return; break;
      case "j": move(1); break;
      case "k": move(-1); break;
      case "a": if (!focusField("approve-note")) return; break;
      case "r": if (!focusField("reject-note")) return; break;
      case "c": if (!focusField("changes-note")) return; break;
      case "/": if (!focusField("filter")) return; break;
      case "?": if (!focusField("shortcuts")) return; break;
      default: return;
    }
    e.preventDefault();
  });

  // --- Bulk selection: checkboxes of the queue belong to #bulk-form. ---
  // The live reload replaces the rows, so the ticked ids are kept here and
  // ticked again after each swap.
  var checked = new Set();

  function rowBoxes() {
    return Array.prototype.slice.call(document.querySelectorAll("#queue [data-select-row]"));
  }

  function updateBulkCount() {
    var count = document.querySelector("[data-bulk-count]");
    var all = document.querySelector("[data-select-all]");
    var boxes = rowBoxes();
    var ticked = boxes.filter(function (b) { return b.checked; }).length;
    var touch = window.matchMedia && window.matchMedia("(hover: none) and (pointer: coarse)").matches;
    if (count) count.textContent = ticked === 0 ? (touch ? "Nothing selected" : "Nothing selected (x selects the focused row)") : ticked + " selected";
    if (all) {
      all.checked = boxes.length > 0 && ticked === boxes.length;
      all.indeterminate = ticked > 0 && ticked < boxes.length;
    }
  }

  function setChecked(box, on) {
    box.checked = on;
    var id = box.getAttribute("data-select-row");
    if (on) { checked.add(id); } else { checked.delete(id); }
    box.closest("tr").classList.toggle("checked", on);
  }

  function restoreChecked() {
    rowBoxes().forEach(function (b) {
      if (b.checked) checked.add(b.getAttribute("data-select-row"));
      setChecked(b, checked.has(b.getAttribute("data-select-row")));
    });
    updateBulkCount();
  }

  // x toggles the row of the focused (or last selected) row.
  function toggleFocusedRow() {
    var link = document.activeElement && document.activeElement.closest &&
      document.activeElement.closest("#queue tr") ? document.activeElement : selectedLink();
    var row = link && link.closest("tr");
    var box = row && row.querySelector("[data-select-row]");
    if (!box) return false;
    setChecked(box, !box.checked);
    updateBulkCount();
    return true;
  }

  document.addEventListener("change", function (e) {
    var t = e.target;
    if (t.matches && t.matches("[data-select-row]")) {
      setChecked(t, t.checked);
      updateBulkCount();
    } else if (t.matches && t.matches("[data-select-all]")) {
      rowBoxes().forEach(function (b) { setChecked(b, t.checked); });
      updateBulkCount();
    }
  });

  restoreChecked();

  // --- Small form helpers. ---
  document.addEventListener("change", function (e) {
    if (e.target.matches && e.target.matches("select[data-autosubmit], input[type=checkbox][data-autosubmit]")) {
      e.target.form.requestSubmit();
    }
  });

  document.addEventListener("submit", function (e) {
    var msg = e.target.getAttribute && e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) {
      e.preventDefault();
      e.stopImmediatePropagation();
    }
  }, true);

  document.addEventListener("click", function (e) {
    var btn = e.target.closest && e.target.closest("[data-copy]");
    if (!btn || !navigator.clipboard) return;
    var src = document.getElementById(btn.getAttribute("data-copy"));
    if (!src) return;
    navigator.clipboard.writeText(src.textContent.trim()).then(function () {
      btn.textContent = "Copied";
    });
  });
})();
