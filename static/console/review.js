/* Review queues: keyboard shortcuts. Every action also works with buttons and without this file.
 *
 *   j / k          move to the next / previous item (in the triage list: its card opens in the
 *                  detail pane)
 *   a              approve the focused promotion request with the reason last used (the first
 *                  time, or with none remembered, it opens the reason field: Enter approves),
 *                  then move to the next open one
 *   r              reject it: opens the reason field (Enter submits the rejection)
 *   1 ... 9        reject it with the tenant's canned reason of that number (the conflict queue:
 *                  1 keep current, 2 accept new, 3 write a corrected value; then the reason)
 *   c              claim the focused request or conflict (release it when it is already yours)
 *   x              select / unselect the focused request or conflict; Shift+j / Shift+k extend
 *                  the selection (in the triage list)
 *   u              undo the last decision while its notice shows
 *   ?              the list of keys
 *
 * Shortcuts do nothing while typing in a field, with Ctrl/Alt/Meta held, or on pages without a
 * [data-review-shortcuts] list. Every key presses a button or fills a field that is on the page
 * for mouse and keyboard alike, so the server sees the same requests either way.
 *
 * Undo: a decision is committed at once, and "Undo" is an audited reversal (it returns the
 * record to provisional, or reopens a rejected request). Holding the decision back until the
 * notice ends would lose it when the tab closes, and would make no-JavaScript decisions behave
 * differently from these; an undo in the audit log is the honest record of what happened.
 */
(function () {
  "use strict";

  var UNDO_SHOWN_MS = 8000;
  var DETAIL_DELAY_MS = 120;

  function isTyping(element) {
    if (!element || !element.tagName) return false;
    if (element.isContentEditable) return true;
    return /^(INPUT|TEXTAREA|SELECT)$/.test(element.tagName) && element.type !== "checkbox";
  }

  function list() {
    return document.querySelector("[data-review-list]");
  }

  function detailPane() {
    return document.querySelector("[data-review-detail]");
  }

  // --- cards (conflicts, one request on its own page) ---------------------------------------

  function cards() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-review-item]"));
  }

  function focusedCard() {
    var active = document.activeElement;
    return active && active.closest ? active.closest("[data-review-item]") : null;
  }

  function focusElement(element) {
    if (!element) return;
    element.focus({ preventScroll: true });
    element.scrollIntoView({ block: "nearest" });
  }

  // Decided items stay on the page (showing their outcome) but j / k pass over them.
  function openCards() {
    return cards().filter(function (card) {
      return !card.classList.contains("is-decided");
    });
  }

  function moveCard(step) {
    var all = cards();
    var open = openCards();
    if (!open.length) return;
    var current = focusedCard();
    var index = all.indexOf(current);
    if (index === -1) {
      focusElement(step > 0 ? open[0] : open[open.length - 1]);
      return;
    }
    for (var i = index + step; i >= 0 && i < all.length; i += step) {
      if (!all[i].classList.contains("is-decided")) {
        focusElement(all[i]);
        return;
      }
    }
    if (current.classList.contains("is-decided")) focusElement(open[step > 0 ? open.length - 1 : 0]);
  }

  // --- the triage list ----------------------------------------------------------------------

  function rows() {
    var container = list();
    return container
      ? Array.prototype.slice.call(container.querySelectorAll("[data-review-row]"))
      : [];
  }

  function currentRow() {
    var active = document.activeElement;
    var row = active && active.closest ? active.closest("[data-review-row]") : null;
    if (row) return row;
    // Focus in the detail pane: its item's row.
    var card = active && active.closest ? active.closest("[data-review-detail] [data-review-item]") : null;
    if (card) return document.getElementById(card.id.replace(/^request-/, "row-"));
    var container = list();
    return container ? container.querySelector(".is-focused") : null;
  }

  function paneShows(row) {
    var pane = detailPane();
    return pane && row && pane.querySelector("#" + row.id.replace(/^row-/, "request-"));
  }

  var detailTimer = null;
  function showDetail(row) {
    if (!row || paneShows(row)) return;
    window.clearTimeout(detailTimer);
    // Held j keys move through rows without loading every card on the way.
    detailTimer = window.setTimeout(function () {
      if (paneShows(row) || !document.body.contains(row)) return;
      window.htmx.ajax("GET", row.getAttribute("data-detail-url") + "?view=list", {
        target: "#review-detail",
        swap: "innerHTML",
      });
    }, DETAIL_DELAY_MS);
  }

  function markRow(row) {
    rows().forEach(function (other) {
      other.classList.toggle("is-focused", other === row);
    });
  }

  function focusRow(row) {
    if (!row) return;
    markRow(row);
    focusElement(row);
    showDetail(row);
  }

  function moveRow(step, extend) {
    var all = rows();
    if (!all.length) return;
    var row = currentRow();
    var active = document.activeElement;
    if (!active || !active.closest || !active.closest("[data-review-row], [data-review-detail]")) {
      // Nothing chosen yet (or focus elsewhere on the page): start at the marked row.
      focusRow(row || all[0]);
      return;
    }
    var index = all.indexOf(row);
    var next = index === -1 ? all[step > 0 ? 0 : all.length - 1]
      : all[Math.min(all.length - 1, Math.max(0, index + step))];
    if (extend) {
      if (row) select(row, true);
      select(next, true);
    }
    focusRow(next);
  }

  function select(row, checked) {
    var box = row && row.querySelector("[data-review-select]");
    if (!box) return;
    box.checked = checked === undefined ? !box.checked : checked;
    updateSelectionCount();
  }

  function updateSelectionCount() {
    var label = document.querySelector("[data-selection-count]");
    if (!label) return;
    var count = document.querySelectorAll("[data-review-select]:checked").length;
    var noun = label.getAttribute("data-selection-noun") || "requests";
    label.textContent = count
      ? count + " selected"
      : "Select " + noun + " with their checkboxes (x)";
    document.querySelectorAll(
      "#review-selection button[name=decision], #review-selection [data-review-claim-selected], " +
        "[data-selection-action]"
    ).forEach(function (b) {
      b.disabled = count === 0;
    });
  }

  function rowAfter(row) {
    if (!row) return null;
    var all = rows();
    var index = all.indexOf(row);
    return all[index + 1] || all[index - 1] || null;
  }

  // An approval needs a reason (the server refuses one without): the reason a reviewer last
  // approved with is remembered in this browser and offered again, so a run of approvals for
  // the same reason stays one key each.
  var LAST_REASON = "memoryconsole.review.lastApproveReason";

  function rememberedReason() {
    try {
      return window.localStorage.getItem(LAST_REASON) || "";
    } catch (error) {
      return "";
    }
  }

  document.addEventListener("submit", function (event) {
    var field = event.target.querySelector && event.target.querySelector("[data-review-approve-reason]");
    if (!field || !field.value.trim()) return;
    try {
      window.localStorage.setItem(LAST_REASON, field.value.trim());
    } catch (error) {
      /* storage refused: the reason is simply asked for next time */
    }
  }, true);

  function approve(row) {
    var field = row && row.querySelector("[data-review-approve-reason]");
    if (field && !field.value.trim()) field.value = rememberedReason();
    if (field && !field.value.trim()) {
      field.focus();
      return;
    }
    var button = row && row.querySelector("[data-review-approve]");
    if (button && !button.disabled) button.click();
  }

  // The last rejection reason is remembered the same way, and offered (selected, so typing
  // replaces it) when r opens the field.
  var LAST_REJECT_REASON = "memoryconsole.review.lastRejectReason";

  function remembered(key) {
    try {
      return window.localStorage.getItem(key) || "";
    } catch (error) {
      return "";
    }
  }

  document.addEventListener("submit", function (event) {
    var field = event.target.querySelector && event.target.querySelector("[data-review-reject-reason]");
    var canned = event.target.querySelector && event.target.querySelector("[data-review-canned]");
    if (!field || !field.value.trim() || (canned && canned.value)) return;
    try {
      window.localStorage.setItem(LAST_REJECT_REASON, field.value.trim());
    } catch (error) {
      /* storage refused */
    }
  }, true);

  function askReason(container) {
    var details = container && container.querySelector("[data-review-reject]");
    if (!details) return;
    details.open = true;
    var field = details.querySelector("input[name=reason]");
    if (!field) return;
    var canned = details.querySelector("[data-review-canned]");
    if (canned) canned.value = "";
    if (!field.value.trim()) field.value = remembered(LAST_REJECT_REASON);
    field.focus();
    field.select();
  }

  // A number key: reject with the tenant's canned reason of that number. In the list, the
  // focused row's own reject form is filled (the reason's text shows, its id goes with it, so
  // the server records the canned reason as it stands) and submitted; on a request's own page,
  // the card's button for that reason is pressed.
  function rejectCanned(container, key) {
    if (!container) return false;
    var button = container.querySelector("[data-review-canned-key='" + key + "']");
    if (button && !container.matches("[data-review-row]")) {
      button.click();
      return true;
    }
    var option = document.querySelector("#canned-reject option[data-canned-key='" + key + "']");
    var form = container.querySelector("[data-review-reject-form]");
    if (!option || !form) return false;
    form.querySelector("[data-review-reject-reason]").value = option.value;
    form.querySelector("[data-review-canned]").value = option.getAttribute("data-canned-id");
    form.requestSubmit();
    return true;
  }

  function claim(container) {
    var button = container && container.querySelector("[data-review-claim]");
    if (button) button.click();
  }

  // The conflict queue: 1 / 2 / 3 choose the resolution of the focused conflict and go to
  // the field still to fill (the corrected value for 3, else the reason); Enter resolves.
  function chooseResolution(card, key) {
    var form = card && card.querySelector("[data-review-resolve]");
    var choice = form && form.querySelector("[data-resolution-key='" + key + "']");
    if (!choice) return false;
    choice.checked = true;
    var next = key === "3" ? form.querySelector("[data-resolution-value]") : null;
    if (!next || next.value.trim()) next = form.querySelector("[data-resolution-reason]");
    if (next) next.focus();
    return true;
  }

  function undo() {
    var button = document.querySelector("[data-review-toast] [data-review-undo]");
    if (button) button.click();
  }

  function openKeys() {
    var dialog = document.getElementById("review-keys");
    if (dialog && !dialog.open) dialog.showModal();
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.key === "Escape" && isTyping(event.target)) {
      // Leave the field, back to its item, so the shortcuts work again.
      var owner = event.target.closest("[data-review-row]") || event.target.closest("[data-review-item]");
      var details = event.target.closest("[data-review-reject]");
      if (details) details.open = false;
      if (owner) focusElement(owner);
      return;
    }
    if (isTyping(event.target)) return;
    var queue = document.querySelector("[data-review-shortcuts]");
    if (!queue) return;
    var decisions = queue.hasAttribute("data-review-decisions");
    var resolutions = queue.hasAttribute("data-review-resolutions");
    var inList = !!list();
    var row = inList ? currentRow() : null;
    switch (event.key) {
      case "j":
      case "J":
        if (inList) moveRow(1, event.shiftKey);
        else moveCard(1);
        break;
      case "k":
      case "K":
        if (inList) moveRow(-1, event.shiftKey);
        else moveCard(-1);
        break;
      case "a":
        if (!decisions) return;
        if (inList) {
          if (!row) return;
          approve(row);
        } else {
          if (!focusedCard()) return;
          approve(focusedCard());
        }
        break;
      case "r":
        if (!decisions) return;
        if (inList) {
          if (!row) return;
          askReason(row);
        } else {
          if (!focusedCard()) return;
          askReason(focusedCard());
        }
        break;
      case "x":
        if (inList) {
          if (!row) return;
          select(row);
        } else {
          if (!focusedCard()) return;
          select(focusedCard());
        }
        break;
      case "c":
        if (!decisions && !resolutions) return;
        if (inList) {
          if (!row) return;
          claim(row);
        } else {
          if (!focusedCard()) return;
          claim(focusedCard());
        }
        break;
      case "1":
      case "2":
      case "3":
      case "4":
      case "5":
      case "6":
      case "7":
      case "8":
      case "9":
        if (resolutions) {
          if (!chooseResolution(focusedCard(), event.key)) return;
        } else if (decisions) {
          if (!rejectCanned(inList ? row : focusedCard(), event.key)) return;
        } else {
          return;
        }
        break;
      case "u":
        if (!inList) return;
        undo();
        break;
      case "?":
        openKeys();
        break;
      default:
        return;
    }
    event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest("[data-keys-open]")) {
      openKeys();
      return;
    }
    var row = event.target.closest("[data-review-row]");
    if (!row) return;
    if (event.target.closest("[data-review-open]")) {
      // With the pane there, a row's title opens the card beside the list (its href, the
      // request's own page, stays for a new tab and for no JavaScript).
      if (event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
      event.preventDefault();
      focusRow(row);
      return;
    }
    if (!event.target.closest("button, input, summary, form, a")) focusRow(row);
  });

  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches("[data-review-select]")) updateSelectionCount();
  });

  // --- after a decision ---------------------------------------------------------------------

  // The row a decision came from (by id: a refusal redraws the row out of band, so the element
  // itself is gone while the request stays pending) and the one to go on to: the decision's
  // answer already shows that next card ("then"), so deciding and advancing is one request.
  var decided = null;
  var advanceTo = null;
  var pendingFocusId = null;
  var undoing = false;
  // A claim answers with its row (and card) redrawn: the focus goes back to the row.
  var claimFocusId = null;

  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    if (!form || !form.querySelector || !form.querySelector("input[name=view][value=list]")) return;
    if (/\/review\/claims\/$/.test(event.detail.path)) {
      var claimed = form.querySelector("input[name=requests]");
      claimFocusId = claimed ? "row-" + claimed.value : null;
      return;
    }
    if (/\/reverse\/$/.test(event.detail.path)) {
      undoing = true;
      return;
    }
    if (!/\/(approve|reject)\/$/.test(event.detail.path)) return;
    var row = form.closest("[data-review-row]");
    if (!row) {
      var card = form.closest("[data-review-item]");
      row = card ? document.getElementById(card.id.replace(/^request-/, "row-")) : null;
    }
    decided = row ? row.id : null;
    advanceTo = rowAfter(row);
    if (advanceTo) event.detail.parameters.then = advanceTo.id.replace(/^row-/, "");
    // The answer adds the next request after the list's last row (rows the notice added
    // out of order are skipped as "last"), so the list never runs dry: no paging step.
    var all = rows();
    var ordered = all.filter(function (r) { return !r.classList.contains("is-new"); });
    var last = ordered[ordered.length - 1];
    if (last) event.detail.parameters.last = last.id.replace(/^row-/, "");
    event.detail.parameters.shown = all.map(function (r) { return r.id.replace(/^row-/, ""); });
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    var item = event.target.closest && event.target.closest("[data-review-item]");
    pendingFocusId = item && !list() ? item.id : null;
  });

  var toastTimer = null;
  function armToast() {
    var toast = document.querySelector("[data-review-toast]");
    if (!toast) return;
    window.clearTimeout(toastTimer);
    if (!toast.querySelector("[data-review-undo]")) return;
    toast.classList.add("is-shown");
    toastTimer = window.setTimeout(function () {
      toast.classList.remove("is-shown");
      toast.replaceChildren();
    }, UNDO_SHOWN_MS);
  }

  document.addEventListener("htmx:afterSettle", function (event) {
    if (list()) {
      afterListSettle(event);
      return;
    }
    if (!pendingFocusId) return;
    var replacement = document.getElementById(pendingFocusId);
    pendingFocusId = null;
    if (!replacement) return;
    var invalid = replacement.querySelector("[aria-invalid=true]");
    if (invalid) {
      invalid.focus();
      return;
    }
    if (replacement.classList.contains("is-decided")) {
      // Resolved: on to the next open item, as a decision in the list goes on to the next.
      var all = cards();
      var after = all.slice(all.indexOf(replacement) + 1).concat(all.slice(0, all.indexOf(replacement)));
      var next = after.filter(function (card) {
        return !card.classList.contains("is-decided");
      })[0];
      focusElement(next || replacement);
      return;
    }
    focusElement(replacement);
  });

  function afterListSettle(event) {
    if (event.detail.target === list()) {
      // New requests were added at the end: the reviewer's place is where it was.
      var marked = list().querySelector(".is-focused");
      var active = document.activeElement;
      if (marked && (!active || active === document.body || !document.body.contains(active))) {
        focusRow(marked);
      }
    }
    if (claimFocusId) {
      var claimedRow = document.getElementById(claimFocusId);
      claimFocusId = null;
      if (claimedRow) {
        focusRow(claimedRow);
        return;
      }
    }
    armToast();
    updateSelectionCount();
    var pane = detailPane();
    if (!pane || event.detail.target !== pane) return;
    if (decided) {
      var row = document.getElementById(decided);
      decided = null;
      if (!row) {
        // Decided: it left the list. On to the next open one.
        var next = advanceTo && document.body.contains(advanceTo) ? advanceTo : rows()[0];
        advanceTo = null;
        if (next) focusRow(next);
        else focusElement(document.getElementById("review-results-heading"));
        return;
      }
      // Refused (a reason missing, your own record, another reviewer's claim...): the row
      // stays, and the card beside it says why until the reviewer moves on themselves.
      var invalid = pane.querySelector("[aria-invalid=true]");
      markRow(row);
      focusElement(invalid || row);
      return;
    }
    if (undoing) {
      // An undo put its row back at the top: carry on from there.
      undoing = false;
      var card = pane.querySelector("[data-review-item]");
      var shown = card && document.getElementById(card.id.replace(/^request-/, "row-"));
      if (shown) focusRow(shown);
    }
  }

  // The conflict queue's rows are cards: the focused one (the first open one to begin with)
  // shows its actions.
  function markCard(card) {
    var container = document.querySelector("[data-conflict-list]");
    if (!container || !card || !container.contains(card)) return;
    cards().forEach(function (other) {
      other.classList.toggle("is-focused", other === card);
    });
  }

  document.addEventListener("focusin", function (event) {
    // Ticking a row's box leaves the focused row be: the rows above keep their height, so the
    // box does not move away under the pointer.
    if (event.target.matches && event.target.matches("[data-review-select]")) return;
    var card = event.target.closest && event.target.closest("[data-conflict-list] [data-review-item]");
    if (card) markCard(card);
  });

  // Rows show their actions only when focused once this script runs (review.css): the list is
  // marked here, and again when filtering or paging draws a new one.
  function markEnhanced() {
    var conflicts = document.querySelector("[data-conflict-list]");
    if (conflicts) {
      conflicts.classList.add("is-enhanced");
      if (!conflicts.querySelector(".is-focused")) markCard(openCards()[0]);
    }
    var container = list();
    if (!container) return;
    container.classList.add("is-enhanced");
    // A newly drawn list starts at its first row, as the card beside it does.
    if (!container.querySelector(".is-focused")) {
      var first = rows()[0];
      if (first) first.classList.add("is-focused");
    }
  }
  document.addEventListener("htmx:load", markEnhanced);

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-keys-open]").forEach(function (button) {
      button.hidden = false;
    });
    markEnhanced();
    updateSelectionCount();
  });
})();
