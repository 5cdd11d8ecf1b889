/* The evaluator's task page: time spent, keyboard shortcuts (A / B / T for comparisons,
 * digits for ratings and labels, S to skip, Enter to submit), ranking by drag and drop or
 * arrows. Nothing here renders text: the page is server-rendered and sanitized. */
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector("form.task");
    if (!form) return;
    var started = Date.now();
    var kind = form.dataset.task;
    var dimension = 0;

    function typing(e) {
      var tag = e.target.tagName;
      return tag === "TEXTAREA" || (tag === "INPUT" && e.target.type === "text");
    }

    function rankingOrder() {
      var keys = [];
      form.querySelectorAll("[data-ranking] [data-key]").forEach(function (li) {
        keys.push(li.dataset.key);
      });
      var field = form.querySelector('input[name="ranking"]');
      if (field) field.value = keys.join(",");
    }

    form.addEventListener("submit", function () {
      form.querySelector('input[name="time_spent_ms"]').value = String(Date.now() - started);
      rankingOrder();
    });

    document.addEventListener("keydown", function (e) {
      if (typing(e) || e.ctrlKey || e.metaKey || e.altKey) return;
      var key = e.key.toLowerCase();
      if (key === "s") {
        var skip = document.querySelector('form[action$="/skip"]');
        if (skip) { e.preventDefault(); skip.submit(); }
        return;
      }
      if (kind === "comparison") {
        var button = form.querySelector('button[data-key="' + key + '"]');
        if (button) { e.preventDefault(); button.click(); }
        return;
      }
      if (/^[0-9]$/.test(key)) {
        if (kind === "rating") {
          var sets = form.querySelectorAll("[data-dimension]");
          if (!sets.length) return;
          var radio = sets[dimension].querySelector('input[value="' + key + '"]');
          if (radio) {
            e.preventDefault();
            radio.checked = true;
            dimension = Math.min(dimension + 1, sets.length - 1);
          }
        } else if (kind === "labeling") {
          var box = form.querySelector('input[data-digit="' + key + '"]');
          if (box) { e.preventDefault(); box.checked = box.type === "radio" ? true : !box.checked; }
        }
      }
    });

    // Ranking: arrows on a selected entry, buttons, or drag and drop.
    var list = form.querySelector("[data-ranking]");
    if (list) {
      var dragged = null;
      list.addEventListener("click", function (e) {
        var move = e.target.closest("[data-move]");
        if (!move) return;
        var li = move.closest("li");
        shift(li, Number(move.dataset.move));
        li.focus();
      });
      list.addEventListener("keydown", function (e) {
        var li = e.target.closest("li");
        if (!li || (e.key !== "ArrowUp" && e.key !== "ArrowDown")) return;
        e.preventDefault();
        shift(li, e.key === "ArrowUp" ? -1 : 1);
        li.focus();
      });
      list.addEventListener("dragstart", function (e) { dragged = e.target.closest("li"); });
      list.addEventListener("dragover", function (e) { e.preventDefault(); });
      list.addEventListener("drop", function (e) {
        e.preventDefault();
        var target = e.target.closest("li");
        if (dragged && target && dragged !== target) list.insertBefore(dragged, target);
        rankingOrder();
      });
      function shift(li, step) {
        if (step < 0 && li.previousElementSibling) list.insertBefore(li, li.previousElementSibling);
        if (step > 0 && li.nextElementSibling) list.insertBefore(li.nextElementSibling, li);
        rankingOrder();
      }
      rankingOrder();
    }
  });
})();
