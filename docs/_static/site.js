// plotly draws a figure as soon as its script runs, before the theme has laid out its sidebars, so a figure can come out
// wider than its column: once the page is laid out, fit every figure to the column it is in
window.addEventListener('load', () => {
  if (window.Plotly) document.querySelectorAll('div.plotly-graph-div').forEach(d => Plotly.Plots.resize(d));
});

// The Contents button of the article's header opens the page's contents (a drawer at every width, site.css): the theme
// listens on the first `.secondary-toggle` of the page only, the top bar's, which the book theme hides
document.addEventListener('DOMContentLoaded', () => {
  const opener = document.querySelector('.bd-header .secondary-toggle');
  document.querySelectorAll('.bd-header-article .secondary-toggle').forEach(b => b.addEventListener('click', e => {
    e.preventDefault(); e.stopPropagation(); if (opener) opener.click();
  }));
});
