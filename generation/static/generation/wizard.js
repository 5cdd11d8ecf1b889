/* The job wizard: one form in five steps. Without JavaScript every step shows at once and the
 * form still works; with it, one step at a time, and the last one asks the server for the
 * summary and cost estimate (the same validation as creating the job). */
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

    function show(n) {
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
    // Enter in a field moves on instead of creating the job before the summary was seen.
    form.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && e.target.tagName === "INPUT" && current < steps.length) {
        e.preventDefault();
        show(current + 1);
      }
    });
    counts();
    show(Number(form.dataset.openStep) || 1);
  });
})();
