# Sphinx configuration of the os-brick-cas documentation.

project = 'os-brick-cas'
copyright = '2026, os-brick-cas developers'
# cliff's autoprogram-cliff renders the CLI reference from the commands
# themselves (the os_brick_cas.cli entry points)
extensions = ['oslo_config.sphinxext', 'cliff.sphinxext', 'reno.sphinxext']
autoprogram_cliff_application = 'os-brick-cas'
master_doc = 'index'
exclude_patterns = ['_build']
html_theme = 'alabaster'
html_static_path = []

# manual pages (sphinx-build -b man)
man_pages = [
    ('cli/index', 'os-brick-cas',
     'Open CAS caching of Cinder RBD volumes on a compute node',
     ['os-brick-cas developers'], 8),
]
