/* Live job progress over the job's WebSocket (generation events).
 *
 * Every element with data-socket is one job: its [data-field] children show the job's state,
 * [data-when="status ..."] children are shown only in those states, [data-processing] lists
 * the cells being generated with their streamed text. All text from the server (model output
 * included) goes through textContent: nothing received is ever parsed as HTML.
 */
(function () {
  "use strict";

  var LABELS = {
    created: "Created", queued: "Queued", running: "Running", paused: "Paused",
    completed: "Completed", failed: "Failed", cancelled: "Cancelled"
  };
  var FINAL = {completed: true, cancelled: true};

  function Job(root) {
    this.root = root;
    this.done = Number(root.dataset.finished || -1);
    this.status = root.dataset.status;
    this.cells = {};
    this.retry = 500;
    this.refreshAt = 0;
    this.showWhen();
    this.connect();
  }

  Job.prototype.set = function (field, value) {
    this.root.querySelectorAll('[data-field="' + field + '"]').forEach(function (el) {
      el.textContent = value;
    });
  };

  Job.prototype.showWhen = function () {
    var status = this.status;
    this.root.querySelectorAll("[data-when]").forEach(function (el) {
      el.hidden = el.dataset.when.split(" ").indexOf(status) < 0;
    });
  };

  Job.prototype.state = function (d, fromSnapshot) {
    // A completed or cancelled job never runs again: only a snapshot may say otherwise.
    if (FINAL[this.status] && !fromSnapshot && d.status !== this.status) return;
    var finished = d.completed + d.failed;
    // Counts only grow within a status: an older message that arrives late is ignored.
    if (d.status === this.status && finished < this.done) return;
    this.done = finished;
    if (d.status !== this.status) {
      this.status = d.status;
      this.root.dataset.status = d.status;
      this.root.querySelectorAll('[data-field="status"]').forEach(function (el) {
        el.className = "status status-" + d.status;
      });
      this.showWhen();
      if (d.status !== "running") this.clearCells();
      // A flash about the job's state ("Job running.") is stale once the state moves on.
      document.querySelectorAll(".messages .job-status").forEach(function (el) { el.remove(); });
      if (!fromSnapshot) this.refreshOutputs(true);
    }
    this.set("status", LABELS[d.status] || d.status);
    this.set("done", d.completed);
    this.set("failed", d.failed);
    this.set("cost", Number(d.cost_usd).toFixed(4));
    this.set("percent", Math.floor(d.progress * 100) + "%");
    this.set("message", d.status_message || "");
    this.root.querySelectorAll('[data-field="bar"]').forEach(function (bar) {
      bar.max = d.total;
      bar.value = finished;
    });
  };

  Job.prototype.list = function () {
    return this.root.querySelector("[data-processing]");
  };

  Job.prototype.clearCells = function () {
    var list = this.list();
    this.cells = {};
    if (list) list.querySelectorAll("[data-output]").forEach(function (el) { el.remove(); });
    this.idle();
  };

  Job.prototype.idle = function () {
    var list = this.list();
    if (!list) return;
    var marker = list.querySelector("[data-idle]");
    if (marker) marker.hidden = Object.keys(this.cells).length > 0;
  };

  Job.prototype.startCell = function (d, text) {
    var list = this.list();
    if (!list) return;
    var cell = this.cells[d.output_id];
    if (!cell) {
      var li = document.createElement("li");
      li.dataset.output = d.output_id;
      var head = document.createElement("div");
      head.className = "cell-head";
      head.textContent = "Item " + d.item_id + " · " + d.prompt + " · " + d.model +
        " · rep " + d.repetition + " · T " + d.temperature;
      var count = document.createElement("small");
      var pre = document.createElement("pre");
      pre.className = "text streaming";
      li.append(head, count, pre);
      list.append(li);
      cell = this.cells[d.output_id] = {el: li, pre: pre, count: count, text: ""};
    }
    this.setText(cell, text || "");
    this.idle();
  };

  Job.prototype.setText = function (cell, text) {
    cell.text = text;
    // Long replies: show the tail, which is where the tokens arrive.
    cell.pre.textContent = text.length > 4000 ? "…" + text.slice(-4000) : text;
    cell.count.textContent = text ? text.length + " characters…" : "waiting for the first token…";
  };

  Job.prototype.token = function (d) {
    var cell = this.cells[d.output_id];
    if (!cell) return;
    if (d.offset > cell.text.length) return; // a gap: wait for the result
    this.setText(cell, cell.text.slice(0, d.offset) + d.delta);
  };

  Job.prototype.endCell = function (d) {
    var cell = this.cells[d.output_id];
    if (cell) {
      cell.el.remove();
      delete this.cells[d.output_id];
    }
    this.idle();
    this.refreshOutputs();
  };

  // The outputs table and the statistics follow the job: at most one reload every two
  // seconds while cells finish, always one after the last event of a burst (a burst's last
  // cell is never left out), and at once when the job ends.
  Job.prototype.refreshOutputs = function (now) {
    var self = this;
    if (now) {
      clearTimeout(this.timer);
      this.timer = null;
      this.again = false;
      this.reload();
      return;
    }
    if (this.timer) {
      this.again = true;
      return;
    }
    this.timer = setTimeout(function () {
      self.timer = null;
      self.reload();
      if (self.again) {
        self.again = false;
        self.refreshOutputs();
      }
    }, 2000);
  };

  Job.prototype.reload = function () {
    var table = document.getElementById("outputs");
    if (!table || !window.htmx) return;
    var stats = document.getElementById("statistics");
    if (stats) window.htmx.ajax("GET", stats.dataset.url, {target: "#statistics"});
    var page = table.querySelector("[data-page]");
    if (page && page.dataset.page !== "1") return; // do not move a reader off their page
    var form = this.root.querySelector("form.filters");
    if (!form) return;
    var query = new URLSearchParams(new FormData(form)).toString();
    window.htmx.ajax("GET", form.getAttribute("hx-get") + "?" + query, {target: "#outputs"});
  };

  Job.prototype.handle = function (message) {
    var d = message.data;
    switch (message.event) {
      case "generation:job:snapshot":
        // What the page was rendered with may be older than the snapshot (the page loaded
        // before the socket opened, or the socket was down): catch the tables up.
        if (d.status !== this.status || d.completed + d.failed !== this.done) {
          this.refreshOutputs(true);
        }
        this.done = -1;
        this.state(d, true);
        this.clearCells();
        for (var i = 0; i < d.processing.length; i++) {
          this.startCell(d.processing[i], d.processing[i].text);
        }
        break;
      case "generation:item:started":
        this.startCell(d, "");
        break;
      case "generation:item:token":
        this.token(d);
        break;
      case "generation:item:completed":
      case "generation:item:failed":
        this.endCell(d);
        break;
      default:
        if (message.event.indexOf("generation:job:") === 0) {
          this.state(d);
          if (message.event !== "generation:job:progress") this.refreshOutputs();
        }
    }
  };

  Job.prototype.connect = function () {
    var self = this;
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host +
      this.root.dataset.socket;
    var socket = new WebSocket(url);
    socket.onopen = function () {
      self.retry = 500;
      self.set("connection", "");
    };
    socket.onmessage = function (e) {
      self.handle(JSON.parse(e.data));
    };
    socket.onclose = function (e) {
      if (e.code === 4401 || e.code === 4404) {
        self.set("connection", "Live updates are not available: sign in again.");
        return;
      }
      if (e.code === 4403) {  // the user may no longer view the job: do not retry
        self.set("connection", "Live updates stopped: you may no longer view this job.");
        return;
      }
      if (FINAL[self.status]) return;
      self.set("connection", "Reconnecting…");
      setTimeout(function () { self.connect(); }, self.retry);
      self.retry = Math.min(self.retry * 2, 10000);
    };
  };

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-socket]").forEach(function (root) { new Job(root); });
    // Forms that destroy something ask first.
    document.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (e) {
        if (!window.confirm(form.dataset.confirm)) e.preventDefault();
      });
    });
  });
})();
