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

// Code wraps rather than run off the column (site.css); a wrapped line goes on under its own indentation plus four
// columns, as an editor's soft wrap does, not at column 0. Pygments closes its spans at each line's end, so each line
// of a highlighted block is whole HTML: it becomes a block of its own with a hanging indent.
document.addEventListener('DOMContentLoaded', () => {
  document.querySelectorAll('.bd-article div.highlight > pre').forEach(pre => {
    const lines = pre.innerHTML.split('\n');
    if (lines.length && lines[lines.length - 1] === '') lines.pop();
    pre.innerHTML = lines.map(html => {
      const text = html.replace(/<[^>]*>/g, '').replace(/&nbsp;/g, ' ');
      const hang = text.length - text.trimStart().length + 4;
      return `<span class="code-line" style="padding-left:${hang}ch;text-indent:-${hang}ch">${html || ' '}\n</span>`;
    }).join('');
  });
});

// The search's snippets come from the page's text: Sphinx reads the theme's `[role="main"]`, which holds the article's
// header too (its buttons' words, "System Settings Light Dark"): read the article alone
document.addEventListener('DOMContentLoaded', () => {
  if (typeof Search === 'undefined' || !Search.htmlToText) return;
  const sphinxText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, 'text/html');
    const article = page.querySelector('.bd-article');
    if (!article || anchor) return sphinxText(htmlString, anchor);
    article.querySelectorAll('.headerlink, script, style').forEach(e => e.remove());
    return article.textContent;
  };
});
