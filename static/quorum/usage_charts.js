// The usage page's charts: Chart.js (static/vendor/chartjs) draws each <canvas data-chart> from
// the numbers the page carries in <script id="usage-data" type="application/json"> (json_script).
// Names go into the chart as text, never as markup. Every chart has a table with the same numbers
// under it, so nothing depends on this script.
(function () {
  "use strict";

  var PALETTE = ["#3655d4", "#e07a2f", "#2f9e6e", "#b5477d", "#7a5cc7", "#c9a227", "#3f8fb5",
                 "#8c6d4f", "#5d6b7a", "#d0463c"];

  function money(value) {
    return "$" + (value < 1 ? value.toFixed(4) : value.toFixed(2));
  }

  function draw(canvas, data) {
    var stacked = canvas.dataset.kind === "stacked";
    var isMoney = canvas.dataset.chart.indexOf("cost") === 0;
    var datasets = data.series.map(function (s, i) {
      var color = PALETTE[i % PALETTE.length];
      return {label: s.name, data: s.values, backgroundColor: color, borderColor: color,
              borderWidth: 0};
    });
    var format = isMoney ? money : function (v) { return Number(v).toLocaleString(); };
    return new window.Chart(canvas, {
      type: "bar",
      data: {labels: data.labels, datasets: datasets},
      options: {
        indexAxis: stacked ? "x" : "y",
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        scales: {
          x: {stacked: stacked, ticks: stacked ? {maxRotation: 60, autoSkip: true} :
              {callback: function (v) { return format(v); }}},
          y: {stacked: stacked, beginAtZero: true,
              ticks: stacked ? {callback: function (v) { return format(v); }} : {autoSkip: false}}
        },
        plugins: {
          legend: {display: datasets.length > 1, position: "bottom"},
          tooltip: {callbacks: {label: function (ctx) {
            return ctx.dataset.label + ": " + format(ctx.parsed[stacked ? "y" : "x"]);
          }}}
        }
      }
    });
  }

  function start() {
    var source = document.getElementById("usage-data");
    if (!source || !window.Chart) return;
    var charts = JSON.parse(source.textContent);
    document.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      var data = charts[canvas.dataset.chart];
      if (!data || !data.labels.length) return;
      if (canvas.dataset.kind !== "stacked") {  // one bar per name: room for each
        canvas.parentNode.style.height = (4 + 2 * Math.min(data.labels.length, 20)) + "rem";
      }
      canvas.chart = draw(canvas, data);
      canvas.dataset.drawn = "true";
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
