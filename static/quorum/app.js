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

  // --- live updates and a form's answer: the newer state wins -------------------------------
  // Every panel carries the number of the run's last event as it was when the panel was
  // rendered (data-as-of), live update and form answer alike. Three rules follow:
  // - A panel is never replaced by an older render of itself (a live update that was on its
  //   way while the answer to a form was rendered, or the other way round).
  // - A live update does not replace a panel whose form is being sent. The decision's own
  //   event often reaches the page before the answer to the form; were the panel replaced
  //   then, the answer (and the status it announces) would be swapped into a panel no longer on
  //   the page and lost. The update is kept instead...
  // - ...and applied once the answer is in, if it is newer than what the answer shows: the
  //   work the decision set going (the worker closing a review, say) can finish while the
  //   answer is on its way, and its last update would otherwise never reach the page.
  // A live update kept back because the person is typing in the panel waits the same way.
  var kept = {}; // region id -> { html, seq } of the newest live update kept back

  function seqOf(el) {
    var seq = el && el.getAttribute ? parseInt(el.getAttribute("data-as-of") || "", 10) : NaN;
    return isNaN(seq) ? -1 : seq;
  }

  function typedIn(region) {
    return Array.prototype.some.call(region.querySelectorAll("textarea, input[type=text]"),
      function (f) { return f.value !== f.defaultValue; });
  }

  function reopenDetails(region, classes) {
    classes.forEach(function (c) {
      var d = region.querySelector("details." + c.trim().split(/\s+/).join("."));
      if (d) d.open = true;
    });
  }

  function keep(region, incoming) {
    var seq = seqOf(incoming);
    var was = kept[region.id];
    if (was && was.seq > seq) return;
    var copy = incoming.cloneNode(true);
    copy.removeAttribute("hx-swap-oob");
    kept[region.id] = { html: copy.outerHTML, seq: seq };
  }

  document.addEventListener("htmx:oobBeforeSwap", function (ev) {
    var target = ev.detail.target;
    var fragment = ev.detail.fragment;
    var incoming = fragment && fragment.firstElementChild;
    if (!target || !target.id || !target.querySelector || !incoming || incoming.id !== target.id) {
      return; // not a whole panel (an innerHTML swap into a status line): nothing to compare
    }
    if (seqOf(incoming) >= 0 && seqOf(target) > seqOf(incoming)) {
      ev.preventDefault(); // the page already shows a newer state of this panel
    } else if (target.querySelector("form.htmx-request")) {
      ev.preventDefault();
      keep(target, incoming);
    } else if (typedIn(target)) {
      // The person is typing in the panel. If the run is still where their form was made
      // for, the update waits for them; if it has moved on (decided in another tab, say),
      // their form can no longer be sent: what they typed goes to "Not sent" and the panel
      // shows the run as it is, so it never offers a decision that cannot apply.
      var outdated = outdatedForms(target, incoming);
      if (!outdated.length || !giveBack(outdated)) {
        ev.preventDefault();
        keep(target, incoming);
      }
    }
  });

  // --- the status line (#gate-status) ------------------------------------------------------
  // Swapped by its content (innerHTML), so that it stays the same live region and keeps the
  // focus a decision gave it. It carries data-as-of like a panel: an older render (the answer
  // to a decision, late behind a live update) never replaces a newer one, and the same words
  // are not put in again (a screen reader would say them again).
  document.addEventListener("htmx:oobBeforeSwap", function (ev) {
    var target = ev.detail.target;
    var fragment = ev.detail.fragment;
    if (!target || target.id !== "gate-status" || !fragment || !fragment.getAttribute) return;
    var seq = seqOf(fragment);
    var now = seqOf(target);
    var focusing = fragment.querySelector("[data-focus-now]");
    var older = seq >= 0 && now > seq;
    if (older || (!focusing && words(fragment) === words(target))) {
      ev.preventDefault();
      var shown = target.querySelector(".notice");
      if (focusing && shown) shown.setAttribute("data-focus-now", ""); // the answer's focus
      return;
    }
    if (seq >= 0) target.setAttribute("data-as-of", String(seq));
  });

  function words(el) {
    return el ? el.textContent.replace(/\s+/g, " ").trim() : "";
  }

  // --- what a person typed for a decision the run has moved on from -------------------------
  // A gate's form names the state it was made for (its seq field). A live update of its panel
  // without that form, at that state, means the decision can no longer be sent.
  function outdatedForms(region, incoming) {
    return Array.prototype.filter.call(region.querySelectorAll("form"), function (form) {
      var seq = form.querySelector("input[name=seq]");
      if (!seq || !typedIn(form)) return false;
      var action = form.getAttribute("action");
      return !Array.prototype.some.call(incoming.querySelectorAll("form"), function (f) {
        var s = f.querySelector("input[name=seq]");
        return f.getAttribute("action") === action && !!s && s.value === seq.value;
      });
    });
  }

  // The typed text of ``forms`` into the page's "Not sent" box (#unsent, outside the panels),
  // field by field (data-unsent names each; a plan's steps are one numbered list), read-only,
  // with what happened. False when the page has no such box (the update then waits).
  function giveBack(forms) {
    var box = document.getElementById("unsent");
    if (!box) return false;
    var groups = [];
    var byLabel = {};
    forms.forEach(function (form) {
      form.querySelectorAll("textarea, input[type=text]").forEach(function (f) {
        var label = f.getAttribute("data-unsent") || f.name;
        if (!byLabel[label]) {
          byLabel[label] = { label: label, fields: [] };
          groups.push(byLabel[label]);
        }
        byLabel[label].fields.push(f);
      });
    });
    var kept = groups.filter(function (g) {
      return g.fields.some(function (f) { return f.value !== f.defaultValue; }) &&
        g.fields.some(function (f) { return f.value.trim(); });
    });
    if (!kept.length) return false;
    var section = document.createElement("section");
    section.className = "card unsent";
    section.setAttribute("tabindex", "-1");
    section.setAttribute("aria-labelledby", "unsent-title");
    var title = document.createElement("h2");
    title.id = "unsent-title";
    title.textContent = "Not sent";
    var said = document.createElement("p");
    said.className = "hint";
    said.setAttribute("role", "alert");
    // The decision that moved it on, quoted from the status line (its part that stays true).
    var decided = words(document.querySelector("#gate-status .decided"));
    said.textContent = "The run moved on while you were typing." + (decided ? " " + decided : "") +
      " None of this was sent or applied; copy what you still need.";
    section.appendChild(title);
    section.appendChild(said);
    kept.forEach(function (g) {
      var text = g.fields.length > 1
        ? g.fields.map(function (f, i) { return (i + 1) + ". " + f.value.trim(); }).join("\n")
        : g.fields[0].value;
      var label = document.createElement("label");
      label.textContent = g.label + " ";
      var area = document.createElement("textarea");
      area.readOnly = true;
      area.rows = 3;
      area.defaultValue = text;
      area.value = text;
      label.appendChild(area);
      section.appendChild(label);
    });
    var dismiss = document.createElement("button");
    dismiss.type = "button";
    dismiss.className = "small";
    dismiss.setAttribute("data-dismiss-unsent", "");
    dismiss.textContent = "Dismiss";
    section.appendChild(dismiss);
    box.replaceChildren(section);
    section.focus(); // out of the panel about to be replaced, onto the text that was in it
    return true;
  }

  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest && ev.target.closest("[data-dismiss-unsent]");
    var box = btn && document.getElementById("unsent");
    if (box) box.replaceChildren();
  });

  // An answer that replaced a part of a panel (one finding's card) makes that panel as new
  // as the answer: the decision's own live update, kept back meanwhile, is then not applied
  // over the answer's message.
  function answerSeq(xhr) {
    var text = (xhr && xhr.responseText) || "";
    var best = -1;
    text.replace(/data-as-of="(\d+)"/g, function (_, n) { best = Math.max(best, parseInt(n, 10)); });
    return best;
  }
  document.addEventListener("htmx:afterSwap", function (ev) {
    var swapped = ev.target;
    if (!ev.detail || !ev.detail.xhr || !swapped || !swapped.parentElement) return;
    var panel = swapped.parentElement.closest("[data-as-of]");
    var seq = answerSeq(ev.detail.xhr);
    if (panel && seq > seqOf(panel)) panel.setAttribute("data-as-of", String(seq));
  });

  function applyKept() {
    Object.keys(kept).forEach(function (id) {
      var region = document.getElementById(id);
      var update = kept[id];
      if (!region) { delete kept[id]; return; }
      if (region.querySelector("form.htmx-request") || typedIn(region)) return; // later
      delete kept[id];
      if (update.seq <= seqOf(region)) return; // the answer is as new: it stays
      var active = document.activeElement;
      var focused = active && active !== document.body && region.contains(active);
      var focusedId = focused ? active.id : "";
      // A field without an id (a finding's comment, focused with C, nothing typed yet) is
      // found again by its tag and name, so the redraw does not take the person out of it.
      var focusedField = focused && !focusedId && active.name
        ? active.tagName.toLowerCase() + '[name="' + CSS.escape(active.name) + '"]' : "";
      var open = Array.prototype.map.call(region.querySelectorAll("details[open][class]"),
        function (d) { return d.className; });
      htmx.swap(region, update.html, { swapStyle: "outerHTML" });
      var fresh = document.getElementById(id);
      if (fresh) reopenDetails(fresh, open);
      if (focused && fresh) {
        var same = focusedId ? document.getElementById(focusedId)
          : focusedField ? fresh.querySelector(focusedField) : null;
        var to = same && fresh.contains(same) ? same : fresh;
        if (!to.matches("a[href], button, input, select, textarea, [tabindex]")) {
          to.setAttribute("tabindex", "-1");
        }
        to.focus();
      }
    });
  }

  // Once a form's answer is in (swapped, refused or lost), what was kept back is looked at.
  document.addEventListener("htmx:afterRequest", function () {
    window.setTimeout(applyKept, 0);
  });

  // --- a live update keeps what the person opened ------------------------------------------
  // A section the person opened ("Reopen triage…") stays open in the redrawn panel.
  var opened = null;
  document.addEventListener("htmx:oobBeforeSwap", function (ev) {
    var target = ev.detail.target;
    opened = null;
    if (ev.defaultPrevented || !target || !target.querySelectorAll) return;
    opened = { region: target.id, classes: Array.prototype.map.call(
      target.querySelectorAll("details[open][class]"), function (d) { return d.className; }) };
  });
  document.addEventListener("htmx:oobAfterSwap", function () {
    var was = opened;
    opened = null;
    var region = was && was.region && document.getElementById(was.region);
    if (region) reopenDetails(region, was.classes);
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
    // The line that says what the chosen pattern is for describes the menu.
    var purpose = form.querySelector("#purpose-" + select.value);
    if (purpose) select.setAttribute("aria-describedby", purpose.id);
    else select.removeAttribute("aria-describedby");
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

  // --- the inbox: cards arriving and leaving over its WebSocket ---------------------------
  // A gate's card lands in #inbox-arrivals (agents_app/inbox_live.py) and replaces the list's
  // card of that run, or joins the end of the list; a removal names a card in #inbox-gone,
  // taken out if the list shows it. Cards keep what htmx bound to them when they landed.
  document.addEventListener("htmx:wsAfterMessage", function () {
    var list = document.getElementById("inbox-cards");
    var arrivals = document.getElementById("inbox-arrivals");
    var gone = document.getElementById("inbox-gone");
    if (!list || !arrivals || !gone) return;
    Array.prototype.slice.call(arrivals.children).forEach(function (card) {
      var shown = card.id ? list.querySelector("#" + CSS.escape(card.id)) : null;
      if (shown) shown.replaceWith(card); else list.appendChild(card);
      var empty = document.getElementById("inbox-empty");
      if (empty) empty.remove();
    });
    Array.prototype.slice.call(gone.children).forEach(function (mark) {
      var name = mark.getAttribute("data-gone") || "";
      var shown = name ? list.querySelector("#" + CSS.escape(name)) : null;
      if (shown) shown.remove();
      mark.remove();
    });
  });

  // --- the timeline follows new events -----------------------------------------------------
  // Its list scrolls inside its card, newest last: it opens at the newest event and stays
  // there as events arrive, unless the person scrolled up to read an older one.
  var following = true;
  function atEnd(tl) { return tl.scrollHeight - tl.scrollTop - tl.clientHeight < 24; }
  function toEnd() {
    var tl = document.getElementById("timeline");
    if (tl) tl.scrollTop = tl.scrollHeight;
  }
  document.addEventListener("htmx:wsBeforeMessage", function () {
    var tl = document.getElementById("timeline");
    following = !tl || atEnd(tl);
  });
  document.addEventListener("htmx:wsAfterMessage", function () { if (following) toEnd(); });
  document.addEventListener("DOMContentLoaded", toEnd);

  // --- text boxes grow with their text -----------------------------------------------------
  // app.css sizes them by their content (field-sizing); where a browser cannot, this does.
  var sizesItself = window.CSS && CSS.supports && CSS.supports("field-sizing", "content");
  function grow(area) {
    if (sizesItself || !area.matches(".plan-step textarea, .unsent textarea")) return;
    area.style.height = "auto";
    area.style.height = area.scrollHeight + 2 + "px";
  }
  function growAll(root) {
    if (sizesItself || !root || !root.querySelectorAll) return;
    root.querySelectorAll(".plan-step textarea, .unsent textarea").forEach(grow);
  }
  document.addEventListener("input", function (ev) {
    if (ev.target.matches && ev.target.matches("textarea")) grow(ev.target);
  });
  document.addEventListener("htmx:load", function (ev) { growAll(ev.detail.elt); });
  document.addEventListener("DOMContentLoaded", function () { growAll(document); });
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

// After an action, say what happened and put the person where it happened.
// One mechanism for every page (templates/base.html holds the #live-status region):
// - A form sent with htmx (any verb but GET) that swaps a region: focus moves to that region
//   (to an element marked data-focus inside it, if any), and the status is read out: the text
//   of the region's [data-announce] element, else its error (role=alert), else its notice.
//   An element of the answer marked data-focus-now (anywhere on the page) wins over both.
// - A live update (WebSocket) moves no focus, but an element with data-live-status whose
//   value changed (a run's status, say) is read out.
// - A whole page that carries a [data-announce] element (after a plain form post) reads it
//   and focuses it on load.
(function () {
  "use strict";
  var pending = null; // the id of the region a person's action will update
  var heard = {};     // data-live-status values already read, by element id

  function say(text) {
    var live = document.getElementById("live-status");
    if (!live || !text) return;
    // Emptied first, so the same words said twice (cancel, then cancel again) are read again.
    live.textContent = "";
    window.setTimeout(function () { live.textContent = text; }, 50);
  }

  function words(el) {
    return el ? el.textContent.replace(/\s+/g, " ").trim() : "";
  }

  function statusOf(region) {
    var marked = region.querySelector("[data-announce]") ||
      region.querySelector("[role=alert]") || region.querySelector(".notice");
    if (marked) return words(marked);
    var heading = region.querySelector("h1, h2, h3");
    return heading ? words(heading) + ": updated." : "";
  }

  function focusIn(region) {
    var target = region.matches("[data-focus]") ? region :
      region.querySelector("[data-focus]") || region;
    if (!target.matches("a[href], button, input, select, textarea, [tabindex]")) {
      target.setAttribute("tabindex", "-1");
    }
    target.focus({ preventScroll: false });
  }

  function liveStatuses(quiet) {
    document.querySelectorAll("[data-live-status]").forEach(function (el) {
      var value = el.getAttribute("data-live-status");
      var key = el.id || "status";
      if (heard[key] !== value && !quiet && heard[key] !== undefined) say(value);
      heard[key] = value;
    });
  }

  document.addEventListener("htmx:beforeRequest", function (ev) {
    var verb = (ev.detail.requestConfig && ev.detail.requestConfig.verb) || "get";
    var target = ev.detail.target;
    pending = verb.toLowerCase() !== "get" && target && target.id ? target.id : null;
  });
  function answered(id) {
    var region = document.getElementById(id);
    if (!region) return;
    liveStatuses(true); // the action's own words say it; no second announcement
    // The answer may carry its status outside the region it swapped (a gate's decision
    // updates the status line above the panels out of band): that element, marked
    // data-focus-now, takes the focus, and a live region it sits in reads it already.
    var now = document.querySelector("[data-focus-now]");
    if (now) {
      now.removeAttribute("data-focus-now");
      focusIn(now);
      if (!now.closest("[aria-live]")) say(words(now));
    } else {
      focusIn(region);
      say(statusOf(region));
    }
  }

  // afterSwap, not afterSettle: an outerHTML swap settles on the element it replaced, which
  // is no longer in the document, so its afterSettle never reaches this listener. And at
  // once: a live update may replace the region a few milliseconds later without the answer's
  // notice (the focus then follows it into the new region, below).
  document.addEventListener("htmx:afterSwap", function (ev) {
    if (!pending || !ev.detail || !ev.detail.xhr) return; // a live update, not the answer
    var id = pending;
    pending = null;
    answered(id);
  });
  document.addEventListener("htmx:afterSettle", function (ev) {
    if (!(ev.detail && ev.detail.xhr)) liveStatuses(false);
  });
  // An answer htmx does not swap in (a 413 for a form too large, a 5xx): said beside the form
  // that sent it, as an alert everyone sees (live-status alone is for screen readers). A short
  // plain-text answer is the server's own sentence; anything else gets a general one.
  document.addEventListener("htmx:responseError", function (ev) {
    pending = null;
    var xhr = ev.detail && ev.detail.xhr;
    var type = (xhr && xhr.getResponseHeader("Content-Type")) || "";
    var text = xhr && /^text\/plain/.test(type) && xhr.responseText.length < 600
      ? xhr.responseText.trim()
      : "That did not work: the server could not answer. Reload the page and try again.";
    var elt = ev.detail && ev.detail.elt;
    var form = elt && elt.closest ? (elt.closest("form") || elt) : null;
    if (!form || !form.parentNode) { say(text); return; }
    var note = form.nextElementSibling;
    if (!note || !note.classList.contains("request-error")) {
      note = document.createElement("p");
      note.className = "error request-error";
      note.setAttribute("role", "alert");
      form.parentNode.insertBefore(note, form.nextSibling);
    }
    note.textContent = text;
    if (note.scrollIntoView) note.scrollIntoView({ block: "nearest" });
  });
  document.addEventListener("htmx:sendError", function () {
    pending = null;
    say("That did not work: the server could not be reached. Check the connection and try again.");
  });
  // A live update that replaces the region holding the focus (the header after a cancel, say)
  // would drop the focus to the page's start: it goes back to the same place in the new region.
  var refocus = null;
  document.addEventListener("htmx:oobBeforeSwap", function (ev) {
    var region = ev.detail.target;
    var active = document.activeElement;
    if (ev.defaultPrevented) return;
    if (region && region.id && active && active !== document.body && region.contains(active)) {
      // The focused element, or the nearest one with an id around it (a finding's card), so
      // that the focus comes back to the same place rather than to the top of the region.
      var holder = active.id ? active : active.parentElement && active.parentElement.closest("[id]");
      refocus = { region: region.id, id: holder && holder !== region && region.contains(holder) ? holder.id : "",
                  // a field without an id (a finding's comment, focused with C): its tag and
                  // name, to find it again in the redrawn card rather than leave it
                  field: !active.id && active.name
                    ? active.tagName.toLowerCase() + '[name="' + CSS.escape(active.name) + '"]' : "" };
    }
  });
  document.addEventListener("htmx:oobAfterSwap", function () {
    if (!refocus) return;
    var region = document.getElementById(refocus.region);
    var same = refocus.id && document.getElementById(refocus.id);
    // The field is looked for in its card, or in the region when the region is the card (a
    // finding's thread redrawn whole by a live update).
    var scope = same || region;
    var field = scope && refocus.field ? scope.querySelector(refocus.field) : null;
    refocus = null;
    if (field && region && region.contains(field)) { field.focus(); return; }
    if (region) focusIn(same && region.contains(same) ? same : region);
  });
  document.addEventListener("htmx:wsAfterMessage", function () { liveStatuses(false); });
  document.addEventListener("DOMContentLoaded", function () {
    liveStatuses(true);
    var marked = document.querySelector("main [data-announce]");
    if (marked) {
      focusIn(marked);
      say(words(marked));
    }
  });
})();

// The review page as a code review: the findings threaded on the diff (or their cards in the
// list) by keyboard. j / k (or the triage bar's buttons) move to the next / previous finding,
// a accepts, r rejects, u undoes, c goes to the comment field. Never while typing in a field,
// nor with a modifier key. Every move and every key that cannot act is said in #live-status;
// a decision clicks the finding's own button, so it goes through the same form, view, checks
// and answer as a click (a double press is a double click: the server's stale check holds).
(function () {
  "use strict";
  var last = null; // { key, inList } of the finding moved to last

  function say(text) {
    var live = document.getElementById("live-status");
    if (!live || !text) return;
    live.textContent = "";
    window.setTimeout(function () { live.textContent = text; }, 50);
  }

  function page() {
    return document.querySelector(".review-page") && document.getElementById("diff-panel");
  }

  // The finding in focus; else, when the focus is nowhere in particular (the page itself, or
  // the triage bar's buttons), the one moved to last. A decision key pressed with the focus
  // elsewhere (the verdict panel, say) decides nothing.
  function current() {
    var active = document.activeElement;
    var item = active && active.closest ? active.closest("[data-finding]") : null;
    if (item) return item;
    var idle = !active || active === document.body || !!active.closest("#triage-bar");
    return idle ? byLast() : null;
  }

  function byLast() {
    return last && document.getElementById((last.inList ? "finding-" : "thread-") + last.key);
  }

  function items(inList) {
    var root = document.getElementById(inList ? "findings-panel" : "diff-panel");
    return root ? Array.prototype.slice.call(root.querySelectorAll("[data-finding]")) : [];
  }

  var STATE = { pending: "not triaged", accepted: "accepted", rejected: "rejected" };

  function stateOf(item) {
    return STATE[item.getAttribute("data-decision")] || item.getAttribute("data-decision");
  }

  function capital(text) {
    return text ? text.charAt(0).toUpperCase() + text.slice(1) : text;
  }

  function describe(item, i, n) {
    var open = !!item.querySelector("form.decide");
    var pending = item.getAttribute("data-decision") === "pending";
    var text = "Finding " + (i + 1) + " of " + n + ": " + item.getAttribute("data-finding") +
      ", " + item.getAttribute("data-severity") + ", " + item.getAttribute("data-title") +
      ", at " + item.getAttribute("data-where") + ". " + capital(stateOf(item)) + ".";
    if (open) text += pending ? " A to accept, R to reject." : " U to undo.";
    return text;
  }

  function reveal(item) {
    for (var d = item.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) {
      d.open = true;
    }
  }

  // j / k move within the view the focus is in: the cards when it is in the list, else the
  // diff; from the finding in focus, else from the one moved to last in that view.
  function move(step) {
    var active = document.activeElement;
    var from = current();
    var within = active && active.closest ? active : null;
    var inList = from ? !!from.closest("#findings-panel")
      : within && within.closest("#findings-panel") ? true
      : within && within.closest("#diff-panel") ? false
      : !!(last && last.inList);
    if (!from && last && last.inList === inList) from = byLast();
    var list = items(inList);
    if (!list.length) { say("There is no finding to move to."); return; }
    var i = from ? list.indexOf(from) : -1;
    var next = i < 0 ? (step > 0 ? 0 : list.length - 1) : i + step;
    if (next < 0 || next >= list.length) {
      say(step > 0 ? "No next finding: this is the last of " + list.length + "."
                   : "No previous finding: this is the first of " + list.length + ".");
      return;
    }
    var item = list[next];
    reveal(item);
    item.focus({ preventScroll: true });
    item.scrollIntoView({ block: "center" });
    last = { key: item.getAttribute("data-finding"), inList: !!item.closest("#findings-panel") };
    say(describe(item, next, list.length));
  }

  function decide(value) {
    var item = current();
    if (!item) { say("Move to a finding first: J goes to the next one."); return; }
    var key = item.getAttribute("data-finding");
    var form = item.querySelector("form.decide");
    var button = form && form.querySelector("button[name=decision][value=" + value + "]");
    if (!form) { say("Triage is closed: " + key + " cannot change now."); return; }
    if (!button) {
      say(value === "pending" ? key + " is not triaged yet: A to accept, R to reject."
                              : key + " is " + stateOf(item) + " already: U to undo it first.");
      return;
    }
    if (form.classList.contains("htmx-request")) return; // sent already: the answer is coming
    button.click();
  }

  function comment() {
    var item = current();
    var field = item && item.querySelector("form.decide input[name=comment][type=text]");
    if (field) { field.focus(); return; }
    say(item ? item.getAttribute("data-finding") + " has no comment field now: U to undo its decision first."
             : "Move to a finding first: J goes to the next one.");
  }

  var KEYS = {
    j: function () { move(1); }, k: function () { move(-1); },
    a: function () { decide("accepted"); }, r: function () { decide("rejected"); },
    u: function () { decide("pending"); }, c: comment
  };

  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || ev.shiftKey || ev.isComposing) return;
    var action = KEYS[ev.key];
    if (!action || !page()) return;
    var t = ev.target;
    if (t && t.closest && t.closest("input, textarea, select, [contenteditable]:not([contenteditable=false])")) return;
    ev.preventDefault();
    action();
  });

  document.addEventListener("click", function (ev) {
    var button = ev.target.closest && ev.target.closest("[data-go]");
    if (!button || !page()) return;
    move(button.getAttribute("data-go") === "next" ? 1 : -1);
  });

  // Approving over accepted critical findings: a dialog names them first. The server refuses
  // the approval without the confirmation all the same (and the panel offers it there).
  document.addEventListener("htmx:confirm", function (ev) {
    var form = ev.detail && ev.detail.elt;
    if (!form || !form.matches || !form.matches("form[data-critical]")) return;
    var trigger = ev.detail.triggeringEvent;
    var action = trigger && trigger.submitter ? trigger.submitter.value : "";
    var select = form.querySelector("select[name=verdict]");
    var approving = (action === "accept" && form.getAttribute("data-proposed") === "approve") ||
      (action === "override" && select && select.value === "approve");
    var box = form.querySelector("input[name=confirm_critical]");
    if (!approving || !box || box.checked) return;
    ev.preventDefault();
    if (window.confirm("Approve the change although you accepted these critical findings? " +
                       form.getAttribute("data-critical"))) {
      box.checked = true;
      ev.detail.issueRequest(true);
    } else {
      say("Not approved: nothing was sent.");
    }
  });
})();

// The inbox: when a pushed removal takes its last card, say it is empty again (the server
// does not know which cards a page holds; the list's own reload would say so 20 s later).
(function () {
  document.addEventListener("htmx:wsAfterMessage", function () {
    var list = document.getElementById("inbox-cards");
    if (!list || list.querySelector(".inbox-card") || document.getElementById("inbox-empty")) return;
    var empty = document.createElement("p");
    empty.className = "empty";
    empty.id = "inbox-empty";
    empty.textContent = "Nothing is waiting for you.";
    list.insertAdjacentElement("afterend", empty);
  });
})();
