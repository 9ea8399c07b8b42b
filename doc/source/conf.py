# Sphinx configuration of the os-brick-cas documentation.

project = 'os-brick-cas'
copyright = '2026, os-brick-cas developers'
extensions = ['oslo_config.sphinxext']
master_doc = 'index'
exclude_patterns = ['_build']
html_theme = 'alabaster'
html_static_path = []
