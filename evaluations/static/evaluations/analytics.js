/* The analytics page's plots, drawn with plotly.js (served from the project) from the
 * analytics JSON the page embeds (json_script). Plotly reads a little HTML in every string
 * it draws (tick labels, trace names, titles, hover texts: <a href>, <b>, <br>, entities),
 * so each of the team's own strings (items, outputs, models, prompts, raters, dimensions)
 * goes through text() first: its < > & become entities, which plotly shows as the
 * characters themselves. A variant id "<a href=...>" is shown, never followed. */
(function () {
  "use strict";
  // "On this page": a link to each section the page has (titles as text, never HTML).
  document.addEventListener("DOMContentLoaded", function () {
    var toc = document.querySelector("[data-toc]");
    if (!toc) return;
    document.querySelectorAll("section.card[id]").forEach(function (section) {
      var title = section.querySelector("h2");
      if (!title || section.id === "summary") return;
      var link = document.createElement("a");
      link.href = "#" + section.id;
      link.textContent = title.textContent;
      toc.appendChild(link);
    });
    toc.hidden = toc.children.length === 0;
  });
  document.addEventListener("DOMContentLoaded", function () {
    var node = document.getElementById("analytics-data");
    if (!node || !window.Plotly) return;
    var data = JSON.parse(node.textContent);
    // A string as plotly shows it literally (see above); not a string: as it is.
    var text = function (value) {
      if (typeof value !== "string") return value;
      return value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
    };
    var config = { displaylogo: false, responsive: true };
    var layout = function (extra) {
      return Object.assign({ margin: { l: 160, r: 20, t: 30, b: 40 }, height: 360 }, extra || {});
    };

    function plot(kind, draw) {
      document.querySelectorAll('[data-plot="' + kind + '"]').forEach(draw);
    }

    plot("bt", function (el) {
      // Outputs compared in separate groups (items) have no common scale: plot the models.
      var fit = data.bradley_terry_fit || {};
      var models = data.by_model;
      var source = fit.components > 1 ? (models && models.bradley_terry) : data.bradley_terry;
      var rows = (source || []).slice(0, 40).reverse();
      if (!rows.length) return;
      // An output by its item, model and prompt (its id only when it has none of them).
      var name = function (r) {
        if (r.item === undefined) return r.variant;
        var parts = [r.item, r.model, r.prompt].filter(function (p) { return p; });
        if (r.repetition !== undefined) parts.push("r" + r.repetition);
        if (r.temperature !== undefined && r.temperature !== null) parts.push("t=" + r.temperature);
        return parts.length > 1 ? parts.join(" · ") : r.variant;
      };
      Plotly.newPlot(el, [{
        type: "scatter", mode: "markers", x: rows.map(function (r) { return r.strength; }),
        y: rows.map(function (r) { return text(name(r)); }),
        error_x: {
          type: "data", symmetric: false,
          array: rows.map(function (r) { return r.ci_high === null ? 0 : r.ci_high - r.strength; }),
          arrayminus: rows.map(function (r) { return r.ci_low === null ? 0 : r.strength - r.ci_low; })
        }
      }], layout({ height: Math.max(240, 22 * rows.length + 60), xaxis: { title: { text: "log-strength" } } }), config);
    });

    plot("heatmap", function (el) {
      // The models' win rates (the outputs' when the scenario names no models).
      var m = (data.by_model && data.by_model.win_matrix) || data.win_matrix;
      if (!m || !m.wins || m.variants.length > 50) return;
      var rate = m.wins.map(function (row, i) {
        return row.map(function (w, j) {
          var games = w + m.ties[i][j] + m.losses[i][j];
          return games ? (w + m.ties[i][j] / 2) / games : null;
        });
      });
      Plotly.newPlot(el, [{ type: "heatmap", z: rate, x: m.variants.map(text), y: m.variants.map(text), zmin: 0, zmax: 1,
        colorscale: "RdBu", colorbar: { title: { text: "win rate" } } }],
        layout({ height: 480, title: { text: "Win rate of the row against the column" } }), config);
    });

    plot("distribution", function (el) {
      var dim = ((data.ratings || {}).dimensions || [])[Number(el.dataset.index)];
      if (!dim) return;
      var traces = dim.by_model.map(function (g) {
        var keys = Object.keys(g.distribution).sort(function (a, b) { return a - b; });
        return { type: "bar", name: text(g.group), x: keys.map(text), y: keys.map(function (k) { return g.distribution[k]; }) };
      });
      Plotly.newPlot(el, traces, layout({ height: 280, barmode: "group", margin: { l: 50, r: 20, t: 30, b: 40 },
        title: { text: text(dim.dimension) + ": scores by model" } }), config);
    });

    plot("stability", function (el) {
      var traces = (data.stability || []).map(function (s) {
        return { type: "scatter", mode: "lines+markers", name: text(s.rater + (s.dimension ? " · " + s.dimension : "")),
          x: s.conditions.map(function (c) { return c.temperature; }),
          y: s.conditions.map(function (c) { return c.mean_item_sd === undefined ? 1 - c.share_identical : c.mean_item_sd; }) };
      });
      if (!traces.length) return;
      Plotly.newPlot(el, traces, layout({ height: 300, margin: { l: 60, r: 20, t: 30, b: 40 },
        xaxis: { title: { text: "temperature" } }, yaxis: { title: { text: "mean SD across repeats (verdicts: share changed)" } } }), config);
    });

    plot("agreement", function (el) {
      var p = (data.agreement || {}).pairwise;
      if (!p || p.raters.length < 2) return;
      Plotly.newPlot(el, [{ type: "heatmap", z: p.agreement, x: p.raters.map(text), y: p.raters.map(text), zmin: 0, zmax: 1,
        colorscale: "Viridis", colorbar: { title: { text: "same answer" } } }],
        layout({ height: 420, title: { text: "Share of shared units where two raters answered alike" } }), config);
    });
  });
})();
