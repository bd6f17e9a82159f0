// Quorum's client script: the plan editor's buttons and the live channel's handshake.
(function () {
  "use strict";

  // --- plan editor: move, delete and add steps without a round trip -------------------------
  function renumber(list) {
    list.querySelectorAll("textarea").forEach(function (t, i) {
      t.setAttribute("aria-label", "Step " + (i + 1));
    });
  }

  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("button");
    if (!btn) return;
    var list = document.getElementById("plan-steps");
    if (!list || !list.contains(btn) && btn.id !== "add-step") return;
    var frozen = parseInt(list.dataset.frozen || "0", 10);
    var item = btn.closest("li");
    var items = Array.prototype.slice.call(list.children);
    var index = item ? items.indexOf(item) : -1;
    if (btn.dataset.move === "up" && index > frozen) {
      list.insertBefore(item, items[index - 1]);
    } else if (btn.dataset.move === "down" && index >= 0 && index < items.length - 1) {
      list.insertBefore(items[index + 1], item);
    } else if (btn.hasAttribute("data-delete")) {
      item.remove();
    } else if (btn.id === "add-step") {
      var template = list.querySelector("li:not(.frozen)");
      var fresh;
      if (template) {
        fresh = template.cloneNode(true);
      } else {
        fresh = document.createElement("li");
        fresh.className = "plan-step";
        fresh.innerHTML = '<textarea name="steps" rows="2"></textarea>';
      }
      var area = fresh.querySelector("textarea");
      area.value = "";
      area.placeholder = "Describe the new step";
      list.appendChild(fresh);
      area.focus();
    } else {
      return;
    }
    renumber(list);
  });

  // --- gates: a live update does not replace a panel whose form is being sent ---------------
  // The decision's own event reaches the page over the WebSocket, often before the answer to
  // the form. Were the panel replaced then, the answer (and the status it announces) would be
  // swapped into a panel no longer on the page and lost; the answer replaces the panel itself.
  document.addEventListener("htmx:oobBeforeSwap", function (ev) {
    var target = ev.detail.target;
    if (target && target.querySelector && target.querySelector("form.htmx-request")) {
      ev.preventDefault();
    }
  });

  // --- start form: show the roles and options of the chosen pattern only ---------------------
  function showPatternFields(form) {
    var select = form && form.querySelector("select[name=pattern]");
    if (!select) return;
    form.querySelectorAll("[data-for]").forEach(function (el) {
      var hide = el.dataset.for.split(" ").indexOf(select.value) < 0;
      el.hidden = hide;
      // A hidden field is not sent: a leftover value of another pattern cannot block this one.
      el.querySelectorAll("input, select, textarea").forEach(function (f) { f.disabled = hide; });
    });
  }

  document.addEventListener("change", function (ev) {
    if (ev.target.matches("select[name=pattern]")) showPatternFields(ev.target.form);
  });
  document.addEventListener("htmx:load", function (ev) {
    ev.detail.elt.querySelectorAll && ev.detail.elt.querySelectorAll("form").forEach(showPatternFields);
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form").forEach(showPatternFields);
  });

  // --- live channel: tell the server which event this page has last --------------------------
  function lastSeq() {
    var tl = document.getElementById("timeline");
    if (!tl) return 0;
    var last = tl.lastElementChild;
    var fromItems = last ? parseInt(last.dataset.seq || "0", 10) : 0;
    return Math.max(fromItems, parseInt(tl.dataset.lastSeq || "0", 10));
  }

  document.addEventListener("htmx:wsOpen", function (ev) {
    ev.detail.socketWrapper.send(JSON.stringify({ after: lastSeq() }));
    document.body.classList.remove("ws-down");
  });
  document.addEventListener("htmx:wsClose", function () {
    document.body.classList.add("ws-down");
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    var tl = document.getElementById("timeline");
    if (tl) tl.dataset.lastSeq = String(lastSeq());
  });
})();

// Review form: show the fields of the chosen source only.
(function () {
  "use strict";
  function sync(root) {
    var form = (root || document).querySelector("#new-review form");
    if (!form) return;
    var checked = form.querySelector("input[name=source]:checked");
    var kind = checked ? checked.value : "paste";
    form.classList.add("js-sources");
    form.querySelectorAll(".source-panel").forEach(function (p) {
      p.classList.toggle("active", p.dataset.source === kind);
    });
  }
  document.addEventListener("change", function (ev) {
    if (ev.target.name === "source") sync();
  });
  document.addEventListener("DOMContentLoaded", function () { sync(); });
  document.addEventListener("htmx:afterSettle", function () { sync(); });
})();
