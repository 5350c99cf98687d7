// plotly draws a figure as soon as its script runs, before the theme has laid out its sidebars, so a figure can come out
// wider than its column: once the page is laid out, fit every figure to the column it is in
window.addEventListener('load', () => {
  if (window.Plotly) document.querySelectorAll('div.plotly-graph-div').forEach(d => Plotly.Plots.resize(d));
});
