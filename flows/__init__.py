"""Prefect 3 flows of faux-checks (thin adapters over the library and the GX suite).

Importing this package sets the embedded environment defaults before Prefect loads.
"""

from faux_checks.settings import configure_environment

configure_environment()
