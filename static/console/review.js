/* Review queues: keyboard shortcuts. Every action also works with buttons and without this file.
 *
 *   j / k   move focus to the next / previous item
 *   a       approve the focused promotion request (first asks for the reason if empty)
 *   r       reject it: opens the reason field (Enter submits the rejection)
 *
 * Shortcuts do nothing while typing in a field, with a modifier key held, or on pages without
 * a [data-review-shortcuts] list. After an item is replaced in place (htmx), focus returns to
 * its new version so j / k carry on from there.
 */
(function () {
  "use strict";

  function isTyping(element) {
    if (!element || !element.tagName) return false;
    if (element.isContentEditable) return true;
    return /^(INPUT|TEXTAREA|SELECT)$/.test(element.tagName);
  }

  function items() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-review-item]"));
  }

  function focusedItem() {
    var active = document.activeElement;
    return active && active.closest ? active.closest("[data-review-item]") : null;
  }

  function focusItem(item) {
    if (!item) return;
    item.focus({ preventScroll: true });
    item.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    var list = items();
    if (!list.length) return;
    var index = list.indexOf(focusedItem());
    if (index === -1) {
      focusItem(step > 0 ? list[0] : list[list.length - 1]);
      return;
    }
    focusItem(list[Math.min(list.length - 1, Math.max(0, index + step))]);
  }

  function approve(item) {
    // An approval needs a reason: an empty one takes focus (Enter then approves).
    var field = item && item.querySelector("[data-review-approve-reason]");
    if (field && !field.value.trim()) {
      field.focus();
      return;
    }
    var button = item && item.querySelector("[data-review-approve]");
    if (button && !button.disabled) button.click();
  }

  function askReason(item) {
    var details = item && item.querySelector("[data-review-reject]");
    if (!details) return;
    details.open = true;
    var field = details.querySelector("input[name=reason]");
    if (field) field.focus();
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.key === "Escape" && isTyping(event.target)) {
      // Leave the field, back to its item, so the shortcuts work again.
      var owner = event.target.closest("[data-review-item]");
      if (owner) focusItem(owner);
      return;
    }
    if (isTyping(event.target)) return;
    var queue = document.querySelector("[data-review-shortcuts]");
    if (!queue) return;
    var decisions = queue.hasAttribute("data-review-decisions");
    switch (event.key) {
      case "j":
        move(1);
        break;
      case "k":
        move(-1);
        break;
      case "a":
        if (!decisions || !focusedItem()) return;
        approve(focusedItem());
        break;
      case "r":
        if (!decisions || !focusedItem()) return;
        askReason(focusedItem());
        break;
      default:
        return;
    }
    event.preventDefault();
  });

  // Remember which item a request came from, to give focus back to its replacement.
  var pendingFocusId = null;
  document.addEventListener("htmx:beforeRequest", function (event) {
    var item = event.target.closest && event.target.closest("[data-review-item]");
    pendingFocusId = item ? item.id : null;
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!pendingFocusId) return;
    var replacement = document.getElementById(pendingFocusId);
    pendingFocusId = null;
    if (!replacement) return;
    var invalid = replacement.querySelector("[aria-invalid=true]");
    if (invalid) {
      invalid.focus();
    } else {
      focusItem(replacement);
    }
  });
})();
