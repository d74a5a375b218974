// Small behaviours of the dashboard, without any framework. Listeners are delegated
// from the document so that they keep working on content htmx swaps in.
(function () {
  "use strict";

  // Copy buttons: data-copy-target names the element whose text is copied.
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy-target]");
    if (!button) return;
    var source = document.getElementById(button.dataset.copyTarget);
    if (!source) return;
    var text = source.textContent;
    var done = function () {
      var label = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = label; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done);
    } else {
      // Plain-HTTP deployments have no clipboard API: select the text for Ctrl+C.
      var range = document.createRange();
      range.selectNodeContents(source);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      button.textContent = "Press Ctrl+C";
    }
  });

  // Bars with data-percent get their width here: the Content-Security-Policy refuses
  // style="" attributes, not styles set from a script. Content htmx swaps in too.
  function sizeBars(root) {
    root.querySelectorAll("[data-percent]").forEach(function (bar) {
      bar.style.width = bar.dataset.percent + "%";
    });
  }
  sizeBars(document);
  document.addEventListener("htmx:load", function (event) { sizeBars(event.target); });

  // Forms with data-confirm ask first (delete).
  document.addEventListener("submit", function (event) {
    var message = event.target.dataset && event.target.dataset.confirm;
    if (message && !window.confirm(message)) event.preventDefault();
  });
})();
