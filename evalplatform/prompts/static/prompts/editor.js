/* The prompt editor's blocks: add, remove and move them in place (without JavaScript, the
 * same buttons post the form and the page comes back with the change, nothing saved). After
 * each change the blocks are renumbered and the preview refreshed ("prompts:changed"). */
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector("form[data-prompt-editor]");
    if (!form) return;
    var list = form.querySelector("[data-blocks]");
    var template = form.querySelector("template[data-block-template]");

    function changed() {
      list.querySelectorAll("[data-block]").forEach(function (block, index) {
        block.querySelector("[data-block-number]").textContent = "Block " + (index + 1);
        block.querySelectorAll("button[data-op]").forEach(function (button) {
          button.value = button.dataset.op + ":" + index;
        });
      });
      form.dispatchEvent(new Event("prompts:changed", { bubbles: true }));
    }

    form.addEventListener("click", function (event) {
      var button = event.target.closest("button[data-op]");
      if (!button) return;
      event.preventDefault();
      var op = button.dataset.op;
      if (op === "add") {
        list.appendChild(template.content.cloneNode(true));
        changed();
        list.lastElementChild.querySelector("input").focus();
        return;
      }
      var block = button.closest("[data-block]");
      if (op === "remove") {
        var next = block.nextElementSibling || block.previousElementSibling;
        block.remove();
        changed();
        (next ? next.querySelector("textarea") : form.querySelector("button[data-op=add]")).focus();
        return;
      }
      if (op === "up" && block.previousElementSibling) {
        list.insertBefore(block, block.previousElementSibling);
      } else if (op === "down" && block.nextElementSibling) {
        list.insertBefore(block.nextElementSibling, block);
      }
      changed();
      button.focus();
    });
  });
})();
