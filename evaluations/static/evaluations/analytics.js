/* The analytics page's plots, drawn with plotly.js (served from the project) from the
 * analytics JSON the page embeds (json_script). Plotly reads a little HTML in every string
 * it draws (tick labels, trace names, titles, hover texts: <a href>, <b>, <br>, entities),
 * so each of the team's own strings (items, outputs, models, prompts, raters, dimensions)
 * goes through text() first: its < > & become entities, which plotly shows as the
 * characters themselves. A variant id "<a href=...>" is shown, never followed. */
(function () {
  "use strict";
  // The sections in tabs (rankings, bias, agreement, judges, stability, or all), under the
  // summary, which stays. Without JavaScript every section shows. A link to a section (the
  // search and the pagers end in #outputs, #elo, ...) opens its tab; titles are text.
  var TABS = [
    ["Rankings", ["models", "outputs", "elo", "ratings", "ranks", "labels"]],
    ["Bias", ["joint", "position"]],
    ["Agreement", ["agreement"]],
    ["Judges", ["judges-compared", "judge-cards"]],
    ["Stability", ["stability"]]
  ];
  document.addEventListener("DOMContentLoaded", function () {
    var bar = document.querySelector("[data-toc]");
    if (!bar) return;
    var sections = Array.prototype.slice.call(document.querySelectorAll("section.card[id]"))
      .filter(function (s) { return s.id !== "summary"; });
    var tabOf = {};
    var tabs = [];
    TABS.forEach(function (entry) {
      var mine = sections.filter(function (s) { return entry[1].indexOf(s.id) >= 0; });
      if (mine.length) tabs.push({ name: entry[0], sections: mine });
    });
    var placed = tabs.reduce(function (all, t) { return all.concat(t.sections); }, []);
    var rest = sections.filter(function (s) { return placed.indexOf(s) < 0; });
    if (rest.length) tabs.push({ name: "More", sections: rest });
    tabs.push({ name: "All", sections: sections });
    if (tabs.length < 3) return; // one group of sections: nothing to choose
    bar.setAttribute("role", "tablist");
    var buttons = tabs.map(function (tab, index) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "tab";
      button.setAttribute("role", "tab");
      button.textContent = tab.name;
      button.addEventListener("click", function () { choose(index, true); });
      bar.appendChild(button);
      tab.sections.forEach(function (s) { if (tab.name !== "All" && !(s.id in tabOf)) tabOf[s.id] = index; });
      return button;
    });
    function choose(index, byHand) {
      tabs.forEach(function (tab, k) {
        buttons[k].setAttribute("aria-selected", k === index ? "true" : "false");
        buttons[k].classList.toggle("current", k === index);
      });
      sections.forEach(function (s) { s.hidden = tabs[index].sections.indexOf(s) < 0; });
      // Plots drawn while hidden have no width: let them fit now.
      window.dispatchEvent(new Event("resize"));
      if (byHand && history.replaceState) {
        history.replaceState(null, "", "#tab-" + tabs[index].name.toLowerCase());
      }
    }
    // The hash as text; a malformed one (a stray %) names nothing.
    function hashText() {
      try {
        return decodeURIComponent(location.hash.slice(1));
      } catch (e) {
        return "";
      }
    }
    function fromHash() {
      var hash = hashText();
      if (hash.indexOf("tab-") === 0) {
        var named = tabs.map(function (t) { return t.name.toLowerCase(); }).indexOf(hash.slice(4));
        return named >= 0 ? named : 0;
      }
      var target = hash && document.getElementById(hash);
      var section = target && target.closest && target.closest("section.card[id]");
      return section && section.id in tabOf ? tabOf[section.id] : 0;
    }
    bar.hidden = false;
    choose(fromHash(), false);
    var target = hashText() && document.getElementById(hashText());
    if (target) target.scrollIntoView();
    window.addEventListener("hashchange", function () { choose(fromHash(), false); });
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
    // Axes make room for their labels (automargin): a long model or prompt name is never cut.
    var layout = function (extra) {
      extra = extra || {};
      var found = Object.assign({ margin: { l: 60, r: 20, t: 40, b: 40 }, height: 360 }, extra);
      found.xaxis = Object.assign({ automargin: true }, extra.xaxis || {});
      found.yaxis = Object.assign({ automargin: true }, extra.yaxis || {});
      return found;
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
