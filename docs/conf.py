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
myst_heading_anchors = 3  # README links such as `#the-gpu-node` resolve to their heading
exclude_patterns = ['_build', 'jupyter_execute', 'figures']  # figures/ holds images and tables, not pages
html_theme = 'sphinx_book_theme'
html_title = 'caopd'
html_static_path = ['_static']
html_css_files = ['site.css']
# the pages' plotly.js, served by the site (the figures' HTML loads none of its own); site.js fits figures to the page
html_js_files = ['plotly.min.js', 'site.js']
mathjax_path = 'tex-svg-full.js'  # MathJax 3 from the site (SVG output needs no web fonts)
html_context = {'default_mode': 'light'}  # without it the theme logs "Got invalid theme mode" in the console
html_theme_options = {'repository_url': 'https://github.com/caopd/caopd', 'use_repository_button': True,
                      'use_download_button': False,  # it links to the sources, which the site does not copy
                      'show_toc_level': 2}
html_show_sourcelink = False
html_copy_source = False  # the notebooks' JSON again, megabytes the site does not need
# nbdev's lessons put a documented function's heading (H3, from show_doc) right under the notebook's title (H1)
suppress_warnings = ['myst.header']
