// Line charts on uPlot (bundled): integer x (turn or call), values shown in the legend under the cursor.
"use strict";
function makeChart(el, height, series, xLabel, opts = {}) {
  const o = {
    width: Math.max(240, el.clientWidth || 320), height,
    legend: { live: true },  // the legend shows the values under the cursor
    cursor: { points: { size: 7 }, drag: { x: false, y: false } },
    hooks: { setCursor: [u => { if (u.cursor.idx === null || u.cursor.idx === undefined) showLast(u); }] },
    scales: { x: { time: false, range: (u, min, max) => [0.5, Math.max(max || 1, 1) + 0.5] },
              y: { range: (u, min, max) => [0, Math.max(max || 1, (u.sbYMax && u.sbYMax()) || 0) * 1.05] } },
    axes: [{ label: xLabel, values: (u, vals) => vals.map(v => Number.isInteger(v) ? v : "") },
           { size: 56, space: 24, values: (u, vals) => vals.map(v => v >= 10000 ? `${Math.round(v / 1000)}k` : fmt(v, v < 10 ? 1 : 0)) }],
    series: [{ label: xLabel, value: (u, v) => v === null || v === undefined ? "–" : `${xLabel} ${v}` },
             ...series.map(s => ({ label: s.label, stroke: s.color, width: 2, points: { show: true, size: 5 }, dash: s.dash || undefined,
                                   value: (u, v) => v === null || v === undefined ? "–" : fmt(v, s.digits || 0) }))],
    ...opts,
  };
  const chart = new uPlot(o, [[], ...series.map(() => [])], el);
  chart.sbEl = el;
  return chart;
}

function resizeCharts(charts) {
  for (const c of charts) c.setSize({ width: Math.max(240, c.sbEl.clientWidth), height: c.height });
}

// Without a cursor over the chart, the legend shows the last point's values (never a row of dashes).
function showLast(chart) {
  const n = chart.data[0].length;
  if (n && chart.cursor.left < 0) chart.setLegend({ idx: n - 1 });
}
