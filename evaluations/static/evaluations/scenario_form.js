/* The scenario form shows the settings of the chosen type only (without JavaScript, all of
 * them are shown and the ones of other types are ignored). */
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector("form.scenario-form");
    if (!form) return;
    var select = form.querySelector("[data-type-select]");
    function show() {
      var kind = select ? select.value : form.dataset.type;
      form.querySelectorAll("fieldset[data-for]").forEach(function (set) {
        set.hidden = set.dataset.for !== kind;
      });
      form.querySelectorAll("[data-for-type]").forEach(function (el) {
        el.hidden = el.dataset.forType !== kind;
      });
    }
    if (select) select.addEventListener("change", show);
    show();
  });
})();
