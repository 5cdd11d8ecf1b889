/* The job wizard: one form in five steps. Without JavaScript every step shows at once and the
 * form still works; with it, one step at a time, each checked before the next opens (what it
 * needs chosen, its numbers in their bounds: the browser's bubble shows on the step itself,
 * never on a hidden one), and the last one asks the server for the summary and cost
 * estimate (the same validation as creating the job), whose errors lead to their step. */
(function () {
  "use strict";

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector("form.wizard");
    if (!form) return;
    var steps = form.querySelectorAll("[data-step]");
    var tabs = form.querySelectorAll("[data-step-tab]");
    var nav = form.querySelector(".wizard-nav");
    var back = nav.querySelector("[data-back]");
    var next = nav.querySelector("[data-next]");
    var current = 1;
    nav.hidden = false;
    // The steps check themselves: the browser would refuse a hidden field without saying why.
    form.noValidate = true;

    function checked(name) {
      return form.querySelectorAll('input[name="' + name + '"]:checked').length > 0;
    }

    function blank(name) {
      var field = form.querySelector('[name="' + name + '"]');
      return !field || !field.value.trim();
    }

    // What a step needs besides its fields' own bounds: a problem in the form's words, or "".
    var NEEDS = {
      1: function () {
        var source = form.querySelector('input[name="source_type"]:checked');
        if (!source) return "Choose where the items come from.";
        if (source.value === "manual") {
          var file = form.querySelector('input[name="file"]');
          var chosen = file && file.files && file.files.length > 0;
          if (!chosen && blank("content")) return "Upload a file or paste the items.";
        } else if (form.querySelector('[name="' + source.value + '"]') && blank(source.value)) {
          return "Choose one."; // a source with a list to choose from (prompt only has none)
        }
        return "";
      },
      2: function () {
        return checked("prompt_versions") ? "" : "Choose at least one prompt template.";
      },
      3: function () {
        return checked("models") || !blank("model_configs") ? "" : "Choose at least one model.";
      }
    };

    function say(n, problem) {
      var box = form.querySelector('[data-step="' + n + '"] [data-step-problem]');
      if (!box) return;
      box.textContent = problem;
      box.hidden = !problem;
    }

    // Whether step n is ready; if not, it is shown with what is wrong.
    function ready(n) {
      var need = NEEDS[n] ? NEEDS[n]() : "";
      say(n, need);
      var fields = form.querySelectorAll('[data-step="' + n + '"] input, [data-step="' + n + '"] textarea, [data-step="' + n + '"] select');
      var invalid = null;
      fields.forEach(function (f) { if (!invalid && !f.disabled && !f.checkValidity()) invalid = f; });
      if (!need && !invalid) return true;
      show(n, true);
      if (invalid) invalid.reportValidity();
      return false;
    }

    // Steps 1 to n - 1 ready (the first that is not is shown).
    function readyUpTo(n) {
      for (var k = 1; k < n; k++) if (!ready(k)) return false;
      return true;
    }

    function show(n, unchecked) {
      if (!unchecked && n > current && !readyUpTo(n)) return;
      current = n;
      steps.forEach(function (s) { s.hidden = Number(s.dataset.step) !== n; });
      tabs.forEach(function (t) {
        t.classList.toggle("current", Number(t.dataset.stepTab) === n);
        t.setAttribute("aria-current", Number(t.dataset.stepTab) === n ? "step" : "false");
      });
      back.hidden = n === 1;
      next.hidden = n === steps.length;
      if (n === steps.length) estimate();
    }

    function estimate() {
      if (!window.htmx) return;
      window.htmx.ajax("POST", form.dataset.estimateUrl, {source: form, target: "#estimate"});
    }

    function counts() {
      form.querySelectorAll("[data-count]").forEach(function (el) {
        var name = el.dataset.count;
        el.textContent = form.querySelectorAll('input[name="' + name + '"]:checked').length;
      });
      var manual = form.querySelector('input[name="source_type"][value="manual"]');
      var fields = form.querySelector('[data-source="manual"]');
      if (manual && fields) fields.hidden = !manual.checked;
    }

    tabs.forEach(function (t) {
      t.tabIndex = 0;
      t.addEventListener("click", function () { show(Number(t.dataset.stepTab)); });
      t.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); show(Number(t.dataset.stepTab)); }
      });
    });
    back.addEventListener("click", function () { show(Math.max(1, current - 1)); });
    next.addEventListener("click", function () { show(Math.min(steps.length, current + 1)); });
    form.addEventListener("change", counts);
    // A step's problem goes as its fields are typed in (not on "change", which fires as the
    // field loses focus: the page would shift under the pointer on its way to "Next").
    form.addEventListener("input", function (e) {
      var step = e.target.closest && e.target.closest("[data-step]");
      if (step) say(Number(step.dataset.step), "");
    });
    // Creating checks every step first; the estimate's errors lead to their step.
    form.addEventListener("submit", function (e) {
      if (!readyUpTo(steps.length)) e.preventDefault();
    });
    form.addEventListener("click", function (e) {
      var go = e.target.closest && e.target.closest("[data-goto-step]");
      if (go) show(Number(go.dataset.gotoStep), true);
    });
    // Enter in a field moves on instead of creating the job before the summary was seen.
    form.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && e.target.tagName === "INPUT" && current < steps.length) {
        e.preventDefault();
        show(current + 1);
      }
    });
    counts();
    show(Number(form.dataset.openStep) || 1, true);
  });
})();
