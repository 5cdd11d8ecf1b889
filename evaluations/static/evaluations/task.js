/* The evaluator's task page: time spent, and the keyboard, the same on every task type:
 *   digits / letters choose (A / B / T on comparisons, digits on ratings, labels and
 *   rankings), Enter submits (Ctrl+Enter even from a text field), S skips, F opens the flag
 *   form, Backspace or ← goes back to the previous task (to revise it), ? shows the legend,
 *   Esc leaves a text field. No key does anything while the evaluator types in a field.
 * Ranking: drag and drop, or select an entry and move it with ↑ / ↓.
 * Nothing here renders text: the page is server-rendered and sanitized. */
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector("form.task");
    if (!form) return;
    var started = Date.now();
    var kind = form.dataset.task;
    var dimension = 0;
    var legend = document.getElementById("shortcuts");
    var legendToggle = document.querySelector("[data-legend-toggle]");

    function typing(target) {
      if (!target || !target.tagName) return false;
      var tag = target.tagName;
      if (tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable) return true;
      if (tag !== "INPUT") return false;
      return ["radio", "checkbox", "button", "submit", "reset", "hidden"].indexOf(target.type) < 0;
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

    function toggleLegend(show) {
      if (!legend) return;
      legend.hidden = show === undefined ? !legend.hidden : !show;
      if (legendToggle) legendToggle.setAttribute("aria-expanded", String(!legend.hidden));
    }
    if (legendToggle) legendToggle.addEventListener("click", function () { toggleLegend(); });

    // The choice a comparison submits with Enter: the pressed button.
    function choose(button) {
      form.querySelectorAll(".choices [aria-pressed]").forEach(function (b) {
        b.setAttribute("aria-pressed", String(b === button));
      });
    }

    function submitAnswer() {
      var button;
      if (kind === "comparison") {
        button = form.querySelector('.choices [aria-pressed="true"]');
        if (!button) {
          var first = form.querySelector(".choices button");
          if (first) first.focus();
          return;
        }
      } else {
        button = form.querySelector("[data-submit]");
      }
      if (typeof form.requestSubmit === "function") form.requestSubmit(button);
      else button.click();
    }

    function goBack() {
      var back = document.querySelector("[data-back]");
      if (back) window.location.assign(back.href);
    }

    var list = form.querySelector("[data-ranking]");

    document.addEventListener("keydown", function (e) {
      if (e.defaultPrevented || e.isComposing) return;
      var key = e.key;
      if (key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        submitAnswer();
        return;
      }
      if (typing(e.target)) {
        if (key === "Escape") e.target.blur();
        return;
      }
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      // A focused button, link or summary does what Enter does to it.
      var control = e.target.closest && e.target.closest("button, a, summary");
      if (key === "Enter") {
        if (control) return;
        e.preventDefault();
        submitAnswer();
        return;
      }
      if (key === "?") { e.preventDefault(); toggleLegend(); return; }
      if (key === "Escape") { toggleLegend(false); return; }
      if (key === "Backspace" || (key === "ArrowLeft" && e.target.type !== "radio")) {
        e.preventDefault();
        goBack();
        return;
      }
      var lower = key.toLowerCase();
      if (lower === "s") {
        var skip = document.querySelector("form[data-skip]");
        if (skip) { e.preventDefault(); skip.submit(); }
        return;
      }
      if (lower === "f") {
        var flag = document.querySelector("details[data-flag]");
        if (flag) {
          e.preventDefault();
          flag.open = true;
          flag.querySelector("select").focus();
        }
        return;
      }
      if (kind === "comparison") {
        var button = form.querySelector('.choices button[data-key="' + lower + '"]');
        if (button) { e.preventDefault(); choose(button); button.focus(); }
        return;
      }
      if (!/^[0-9]$/.test(key)) return;
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
      } else if (kind === "ranking" && list) {
        var entry = list.querySelectorAll("li")[Number(key) - 1];
        if (entry) { e.preventDefault(); entry.focus(); }
      }
    });

    // Ranking: arrows on a selected entry, buttons, or drag and drop.
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
        moved();
      });
      function shift(li, step) {
        if (step < 0 && li.previousElementSibling) list.insertBefore(li, li.previousElementSibling);
        if (step > 0 && li.nextElementSibling) list.insertBefore(li.nextElementSibling, li);
        rankingOrder();
        moved();
      }
      // A response moved: the order shown is now the evaluator's answer.
      function moved() {
        var box = form.querySelector("[data-as-shown]");
        if (box) box.checked = true;
      }
      rankingOrder();
    }

    // The first key works: the page's focus is on the task, never left in a field.
    if (!document.activeElement || document.activeElement === document.body) {
      form.focus({ preventScroll: true });
    }
  });
})();
