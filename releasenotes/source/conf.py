# Sphinx configuration of the os-brick-cas release notes (reno).
project = 'os-brick-cas Release Notes'
copyright = '2026, os-brick-cas developers'
extensions = ['reno.sphinxext']
master_doc = 'index'
html_theme = 'alabaster'
exclude_patterns = []
