/* Memory Console: small progressive enhancements. Every page works without this file. */
(function () {
  "use strict";

  // Copy buttons: <button data-copy="#input-id" hidden>. Shown only when the Clipboard API
  // is there; the field stays selectable for copying by hand either way.
  function revealCopyButtons(root) {
    if (!navigator.clipboard) return;
    root.querySelectorAll("[data-copy][hidden]").forEach(function (button) {
      button.hidden = false;
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var field = document.querySelector(button.getAttribute("data-copy"));
    if (!field) return;
    var status = button.parentElement.querySelector(".copy-status");
    navigator.clipboard.writeText(field.value).then(
      function () {
        if (status) status.textContent = "Copied to the clipboard.";
        button.textContent = "Copied";
      },
      function () {
        field.select();
        if (status) status.textContent = "Could not copy: the token is selected, press Ctrl+C.";
      }
    );
  });

  // Select the whole token when the field gets focus.
  document.addEventListener("focusin", function (event) {
    if (event.target.matches && event.target.matches("input.token")) event.target.select();
  });

  // Failed htmx actions. htmx swaps nothing for a 4xx/5xx answer, so without this a refused
  // action (a stale tab, a role changed meanwhile, a server error) looks like a dead button.
  // The message says the status and, when the answer is one of the console's error pages,
  // its explanation ([data-failure-message]); it goes into the page's messages area.
  var STATUS_WORDS = {
    400: "the request was refused as invalid",
    403: "you are not allowed to do this (any more)",
    404: "it no longer exists, or you no longer have access to it",
    405: "this action is not available here",
    409: "it changed meanwhile",
    429: "too many requests; wait a moment",
    500: "the server failed; nothing was half-saved",
    502: "the server is unreachable",
    503: "the server is unavailable",
  };

  function explanation(xhr) {
    var type = xhr.getResponseHeader("Content-Type") || "";
    if (type.indexOf("text/html") === -1 || !xhr.responseText) return "";
    var parsed = new DOMParser().parseFromString(xhr.responseText, "text/html");
    var found = parsed.querySelector("[data-failure-message]");
    return found ? found.textContent.replace(/\s+/g, " ").trim() : "";
  }

  function showFailure(text) {
    var area = document.getElementById("messages");
    if (!area) {
      window.alert(text);
      return;
    }
    var message = document.createElement("p");
    message.className = "message message-error";
    message.setAttribute("role", "alert");
    message.setAttribute("data-failure", "");
    var kind = document.createElement("span");
    kind.className = "message-kind";
    kind.textContent = "Error:";
    message.appendChild(kind);
    message.appendChild(document.createTextNode(" " + text));
    area.replaceChildren(message);
    area.scrollIntoView({ block: "nearest" });
  }

  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var words = STATUS_WORDS[xhr.status] || (xhr.status >= 500 ? "the server failed" : "refused");
    var detail = explanation(xhr);
    showFailure(
      "That did not work (" + xhr.status + "): " + words + "." + (detail ? " " + detail : "") +
        " Nothing on this page changed; reload it to see the current state."
    );
  });
  document.addEventListener("htmx:sendError", function () {
    showFailure("That did not reach the server (no connection?). Nothing was changed; try again.");
  });

  // The sections menu on narrow screens: folded until asked for, closed by Escape.
  function setupNavToggle() {
    var toggle = document.querySelector("[data-nav-toggle]");
    var nav = toggle && document.getElementById(toggle.getAttribute("aria-controls"));
    if (!nav) return;
    toggle.hidden = false;
    document.documentElement.classList.add("nav-folds");
    function setOpen(open) {
      nav.classList.toggle("is-open", open);
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
    }
    toggle.addEventListener("click", function () {
      setOpen(!nav.classList.contains("is-open"));
    });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && nav.classList.contains("is-open")) {
        setOpen(false);
        toggle.focus();
      }
    });
  }

  // The tenant switcher (a <details>) closes on Escape and on a click outside it, like a menu.
  function setupSwitcher() {
    var switcher = document.querySelector(".switcher details");
    if (!switcher) return;
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && switcher.open) {
        switcher.open = false;
        switcher.querySelector("summary").focus();
      }
    });
    document.addEventListener("click", function (event) {
      if (switcher.open && !switcher.contains(event.target)) switcher.open = false;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    setupNavToggle();
    setupSwitcher();
    revealCopyButtons(document);
  });
  document.addEventListener("htmx:load", function (event) {
    revealCopyButtons(event.target);
  });
})();
