"""The compliance report of a gate or audit run: ``report.json`` and a self-contained ``report.html``.

- ``build``: the report dict (versioned, :func:`~faux_checks.report.build.write_report` writes both files);
- ``schema``: ``report_schema.json`` (JSON Schema 2020-12), validation and loading;
- ``html``: the page, rendered from the report dict with ``templates/report.html.j2`` (Jinja2);
- ``plots``: the figures, embedded as PNG data URIs (the page works offline);
- ``artifacts``: the Prefect markdown and table artifacts of a report.
"""
