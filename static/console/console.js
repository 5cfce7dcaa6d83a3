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

  document.addEventListener("DOMContentLoaded", function () {
    revealCopyButtons(document);
  });
  document.addEventListener("htmx:load", function (event) {
    revealCopyButtons(event.target);
  });
})();
