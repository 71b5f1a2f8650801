"""The front door of faux-checks: the ``faux-checks`` command line and the Adult demo.

It stands above everything else (library, Great Expectations suite, Prefect flows), so the
library never imports the integrations: the commands call the flows for ``gate``, ``audit``,
``demo`` and sharded ``score-large``, and the library for ``check``, ``report`` and ``history``
(``cli.main`` runs them; ``parser``, ``check_cli``, ``gate_cli``, ``tools_cli``: docs/architecture.md);
``demo`` trains the demo model versions on UCI Adult (``python -m faux_checks_app.demo`` measures
them).
"""
