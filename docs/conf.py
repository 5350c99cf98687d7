"""Sphinx settings of the site (docs/build.py copies this file into the folder it stages and builds)."""
project = 'caopd'
author = 'caopd developers'
copyright = '2026 onwards, caopd developers'
root_doc = 'README'  # the repository's README is the home page
extensions = ['myst_nb']
nb_execution_mode = 'off'  # the notebooks arrive executed (docs/build.py: the cache, or a committed run)
nb_merge_streams = True
nb_render_markdown_format = 'gfm'  # a cell's Markdown output (the run notebooks' tables) as GitHub renders it: tables
myst_enable_extensions = ['dollarmath', 'amsmath']
# `$$...$$` inside a paragraph is display math, as Jupyter and GitHub show it; MyST's default reads each `$$` as an
# empty `$...$`, pairing the dollars after it wrongly: prose came out as one long italic formula, off the column
myst_dmath_double_inline = True
highlight_language = 'none'  # a fence with no language (a program's output, a timing) is text, not Python
myst_heading_anchors = 3  # README links such as `#the-gpu-node` resolve to their heading
exclude_patterns = ['_build', 'jupyter_execute', 'figures']  # figures/ holds images and tables, not pages
html_theme = 'sphinx_book_theme'
html_title = 'caopd'
html_static_path = ['_static']
html_css_files = ['site.css']
# site.js fits figures to the page, and opens the page's contents from the article's header
html_js_files = ['site.js']
# a page titled by the words searched for first (the file says why); Sphinx opens it from the working folder
html_search_scorer = str(__import__('pathlib').Path(__file__).resolve().parent/'_static'/'scorer.js')
mathjax_path = 'tex-svg-full.js'  # MathJax 3 from the site (SVG output needs no web fonts)
html_context = {'default_mode': 'light'}  # without it the theme logs "Got invalid theme mode" in the console
html_theme_options = {'repository_url': 'https://github.com/caopd/caopd', 'use_repository_button': True,
                      'use_download_button': False,  # it links to the sources, which the site does not copy
                      'show_toc_level': 2,
                      # one search box, the navigation's: pydata's top bar would add a second (and an empty bar)
                      'navbar_persistent': []}
html_favicon = '_static/favicon.svg'  # else a browser asks for /favicon.ico, which the site has not
html_show_sourcelink = False
html_copy_source = False  # the notebooks' JSON again, megabytes the site does not need
# nbdev's lessons put a documented function's heading (H3, from show_doc) right under the notebook's title (H1)
suppress_warnings = ['myst.header']


def _plotly_where_drawn(app, pagename, templatename, context, doctree):
    "plotly.js, served by the site (the figures' HTML loads none of its own), on the pages with a figure: 4.6 MB, 19 pages"
    if 'plotly-graph-div' in context.get('body', ''): app.add_js_file('plotly.min.js', priority=400)

def setup(app): app.connect('html-page-context', _plotly_where_drawn)
