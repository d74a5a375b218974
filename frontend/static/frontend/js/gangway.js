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

  // The job form: a job on one of the user's dev clusters takes that cluster's shape,
  // so the shape inputs are hidden while one is chosen (the server ignores them then).
  function toggleShape(select) {
    var hosted = select.value !== "";
    select.form.querySelectorAll("[data-shape-field]").forEach(function (field) {
      field.hidden = hosted;
    });
  }
  document.querySelectorAll("select[data-hides-shape]").forEach(toggleShape);
  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches("select[data-hides-shape]")) {
      toggleShape(event.target);
    }
  });

  // Inputs that matter only for one value of another (data-shown-when names it, and
  // data-shown-value the value) are hidden otherwise; the server judges them either way,
  // so one the server refused stays in sight with its error.
  function toggleShown(form) {
    form.querySelectorAll("[data-shown-when]").forEach(function (field) {
      var other = form.elements[field.dataset.shownWhen];
      var shown = other && other.value === field.dataset.shownValue;
      field.hidden = !shown && !field.classList.contains("has-error");
    });
  }
  // "Keep workers together" offers the chosen flavor's topology levels only (each
  // option's data-flavors lists the flavors that have it); a flavor without levels, a
  // dev request or a job on a dev cluster hides the level and its mode (unless refused).
  function toggleLevels(form) {
    var select = form.querySelector("select[data-topology-levels]");
    if (!select) return;
    var flavor = form.elements.flavor ? form.elements.flavor.value : "";
    var offered = 0;
    Array.prototype.forEach.call(select.options, function (option) {
      if (!option.value) return;
      var has = (option.dataset.flavors || "").split(" ").indexOf(flavor) !== -1;
      option.hidden = !has;
      option.disabled = !has;
      if (has) offered += 1;
      else if (option.selected) select.value = "";
    });
    var host = form.querySelector("select[data-hides-shape]");
    var hosted = host && host.value !== "";
    ["topology_level", "topology_mode"].forEach(function (name) {
      var field = document.getElementById("field-" + name);
      if (field && (offered === 0 || hosted) && !field.classList.contains("has-error")) {
        field.hidden = true;
      }
    });
  }
  function toggleForm(form) {
    toggleShown(form);
    toggleLevels(form);
  }
  document.querySelectorAll("form").forEach(toggleForm);
  document.addEventListener("change", function (event) {
    if (event.target.form) { toggleForm(event.target.form); }
  });

  // A driver's log panel shows its newest lines: scrolled to the bottom when swapped in.
  function scrollLogs(root) {
    root.querySelectorAll("pre.log").forEach(function (pre) { pre.scrollTop = pre.scrollHeight; });
  }
  scrollLogs(document);
  document.addEventListener("htmx:load", function (event) { scrollLogs(event.target); });

  // On a phone a list table shows each row as a card, each cell led by its column's name
  // (CSS reads data-label). Cells a template did not label take their column's heading;
  // a row short of cells (a rowspan above it) lines up with the head from the right.
  function labelCells(root) {
    root.querySelectorAll("table.list").forEach(function (table) {
      var heads = table.querySelectorAll("thead th");
      var names = [];
      heads.forEach(function (th) {
        for (var i = 0; i < (th.colSpan || 1); i++) names.push(th.textContent.trim());
      });
      table.querySelectorAll("tbody tr").forEach(function (row) {
        var cells = Array.prototype.slice.call(row.children);
        var width = cells.reduce(function (n, cell) { return n + (cell.colSpan || 1); }, 0);
        var column = Math.max(0, names.length - width);
        cells.forEach(function (cell) {
          var name = names[column];
          if (name && (cell.colSpan || 1) === 1 && !cell.hasAttribute("data-label")) {
            cell.setAttribute("data-label", name);
          }
          column += cell.colSpan || 1;
        });
      });
    });
  }
  labelCells(document);
  document.addEventListener("htmx:load", function (event) { labelCells(event.target); });

  // A session that ended while a form was being filled in: the server answers htmx with
  // HX-Redirect to the sign-in page (frontend/middleware.py). What was typed is kept in
  // sessionStorage, keyed by the page, and put back when the page opens after signing in.
  var KEPT = "gangway:forms:";
  var SKIPPED = ["hidden", "password", "file", "submit", "button"];
  function editable(field) {
    return field.name && SKIPPED.indexOf(field.type) === -1;
  }
  function keepForms() {
    var kept = [];
    Array.prototype.forEach.call(document.forms, function (form, index) {
      var fields = Array.prototype.filter.call(form.elements, editable).map(function (field) {
        var value = field.type === "checkbox" || field.type === "radio" ? field.checked
          : field.type === "select-multiple"
            ? Array.prototype.filter.call(field.options, function (o) { return o.selected; })
              .map(function (o) { return o.value; })
            : field.value;
        return [field.name, field.value, value];
      });
      if (fields.length) kept.push({ id: form.id, index: index, fields: fields });
    });
    if (kept.length) sessionStorage.setItem(KEPT + location.pathname, JSON.stringify(kept));
  }
  function restoreForms() {
    var raw = sessionStorage.getItem(KEPT + location.pathname);
    if (!raw) return;
    sessionStorage.removeItem(KEPT + location.pathname);
    JSON.parse(raw).forEach(function (saved) {
      var form = saved.id ? document.getElementById(saved.id) : document.forms[saved.index];
      if (!form) return;
      var fields = Array.prototype.filter.call(form.elements, editable);
      saved.fields.forEach(function (entry, i) {
        var field = fields[i];
        if (!field || field.name !== entry[0]) return;  // the form changed meanwhile
        if (field.type === "checkbox" || field.type === "radio") {
          if (field.value === entry[1]) field.checked = entry[2];
        } else if (field.type === "select-multiple") {
          Array.prototype.forEach.call(field.options, function (o) {
            o.selected = entry[2].indexOf(o.value) !== -1;
          });
        } else {
          field.value = entry[2];
        }
      });
    });
  }
  restoreForms();
  document.addEventListener("htmx:beforeOnLoad", function (event) {
    var xhr = event.detail.xhr;
    if (xhr && xhr.getResponseHeader("HX-Redirect")) keepForms();
  });

  // Forms with data-confirm ask first (delete).
  document.addEventListener("submit", function (event) {
    var message = event.target.dataset && event.target.dataset.confirm;
    if (message && !window.confirm(message)) event.preventDefault();
  });
})();
