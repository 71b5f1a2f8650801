"""The HTML report of a known report: shares shown one way (percent), each statistic named for what it is."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from faux_checks.gate.decision import rule_row
from faux_checks.report._format import FRACTION_FIELDS
from faux_checks.report.build import build_report
from faux_checks.report.html import render_html

#: every share in the known reports below, and how it must read
SHARES = {0.47: "47.00%", 0.4375: "43.75%", 0.5025: "50.25%", 0.375: "37.50%", 0.5333: "53.33%", 0.1875: "18.75%",
          0.3125: "31.25%", 0.095: "+9.50%", 0.25: "25.00%"}


def _check() -> dict:
    return {
        "decision": "failed", "exit_code": 1, "reasons": ["flagged fraction 47.00% > max_flagged_fraction 5.00%"],
        "flagged_fraction": 0.47, "flagged_fraction_defined": 0.47, "delta": 0.1, "max_flagged_fraction": 0.05,
        "interval": {"fraction": 0.47, "lower": 0.4375, "upper": 0.5025, "confidence": 0.95},
        "n_individuals": 1000, "n_undefined": 0, "n_flagged": 470, "n_missing_protected": 0,
        "rules": [rule_row("min_aux_quality", "ok", "auxiliary model roc_auc 0.8125", 0.8125, 0.7),
                  rule_row("max_flagged_fraction", "exceeded", "flagged fraction 47.00% > 5.00%", 0.47, 0.05),
                  rule_row("tester:demographic_parity", "ok", "demographic_parity_difference 18.75%", 0.1875, 0.2)],
        "aux_quality": 0.8125, "aux_quality_metric": "roc_auc",
        "by_group": [{"group": "F", "n": 400, "flagged": 150, "flagged_fraction": 0.375,
                      "flagged_fraction_defined": 0.375, "undefined": 0, "mean_score": 0.1234, "p90_score": 0.3456},
                     {"group": "M", "n": 600, "flagged": 320, "flagged_fraction": 0.5333,
                      "flagged_fraction_defined": 0.5333, "undefined": 0, "mean_score": 0.2345, "p90_score": 0.4567}],
        "testers": {"demographic_parity": {"statistic": "demographic_parity_difference", "value": 0.1875,
                                           "threshold": 0.2, "limit": 0.2, "gating": True, "passed": True,
                                           "summary": "demographic_parity_difference 18.75% (limit 20.00%)"},
                    "fta": {"statistic": "flagged_fraction", "value": 0.3125, "threshold": 1.0, "limit": 0.4,
                            "gating": False, "passed": True, "summary": "31.25% of individuals with ‖∇P‖ > 1"}},
        "provenance": {"variant": "swap", "policy": {"protected": "sex", "min_aux_quality": 0.7,
                                                     "faux": {"delta": 0.1, "max_flagged_fraction": 0.05},
                                                     "decision": {"confidence": 0.95}}},
    }


def _audit() -> dict:
    return {
        "drift": {"n_reference": 1000, "n_current": 1000, "n_compared": 4, "n_drifted": 1, "drifted_share": 0.25,
                  "columns": [{"column": "sex", "role": "protected", "status": "compared", "kind": "categorical",
                               "method": "Z-test p_value", "score": 0.0123, "threshold": 0.05, "drifted": True}]},
        "fairness": {"flagged_fraction_reference": 0.375, "flagged_fraction_current": 0.47, "increase": 0.095,
                     "ks_statistic": 0.1719, "ks_pvalue": 0.0042, "n_reference_scores": 1000, "n_current_scores": 1000,
                     "by_group": []},
        "limits": [rule_row("protected_drift", "exceeded", "the protected attribute 'sex' drifted", 0.0123, 0.05),
                   rule_row("max_drifted_share", "ok", "1 of 4 columns drifted", 0.25, 0.5),
                   rule_row("max_flagged_fraction_increase", "exceeded", "+9.50% > 5.00%", 0.095, 0.05),
                   rule_row("score_ks", "exceeded", "KS statistic 0.172, p = 0.0042", 0.0042, 0.01)],
        "classification": {"status": "not computed", "reason": "no label"},
    }


class _Tables(HTMLParser):
    """Every table as (header, rows of cell texts), and the visible text outside <pre> (raw JSON dumps)."""

    def __init__(self):
        super().__init__()
        self.tables, self.text, self._cell, self._pre = [], [], None, 0

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append(([], []))
        elif tag == "tr":
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "pre":
            self._pre += 1

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell).strip()
            header, rows = self.tables[-1]
            (header if tag == "th" else rows[-1]).append(text)
            self._cell = None
        elif tag == "pre":
            self._pre -= 1
        elif tag == "tr" and not self.tables[-1][1][-1]:   # the header row holds <th> cells only
            self.tables[-1][1].pop()

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if not self._pre:
            self.text.append(data)


def _render(kind: str) -> _Tables:
    check = _check()
    if kind == "gate":
        report = build_report(decision="failed", reasons=check["reasons"], check=check, model={"name": "m", "version": "1"},
                              expectations=[{"type": "expect_faux_flagged_fraction_to_be_at_most", "success": False,
                                             "observed_value": 0.47, "gating": True, "exception": None}])
    else:
        report = build_report(kind="audit", decision="failed", reasons=["score_ks exceeded"], check=check,
                              audit=_audit(), model={"name": "m", "version": "1"})
    page = _Tables()
    page.feed(render_html(report))
    page.close()
    return page


@pytest.mark.parametrize("kind", ["gate", "audit"])
def test_shares_read_as_percentages_everywhere(kind):
    page = _render(kind)
    text = " ".join(page.text)
    shown = {v: s for v, s in SHARES.items() if kind == "audit" or v not in (0.095, 0.25)}
    for value, percent in shown.items():
        assert percent in text, (value, percent)
        decimal = re.escape(f"{value:.4g}")
        assert not re.search(rf"(?<![\d.]){decimal}(?!\d)", text), f"{value} shown as a decimal"
    checked = 0
    for header, rows in page.tables:
        if not header:   # a table without header cells (none in the template today)
            continue
        for row in rows:
            for column, cell in zip(header, row, strict=False):
                if column in FRACTION_FIELDS and cell != "n/a":
                    assert cell.endswith("%"), (column, cell)
                    checked += 1
    # gate: the two groups' two fractions and this run's history point; audit: + reference, current, increase
    assert checked == (5 if kind == "gate" else 8)
    # the policy's limits on shares are percentages too, its δ (probability points) and AUC floor are not
    policy = next(rows for header, rows in page.tables if header[:2] == ["field", "value"] and
                  any(r and r[0] == "δ (delta)" for r in rows))
    values = {r[0]: r[1] for r in policy if len(r) == 2}
    assert values["max_flagged_fraction"] == "5.00%" and values["decision.confidence"] == "95.00%"
    assert values["δ (delta)"] == "0.1" and values["min_aux_quality"] == "0.7"


@pytest.mark.parametrize("kind", ["gate", "audit"])
def test_each_statistic_is_named_for_what_it_is(kind):
    page = _render(kind)
    headers = [h for header, _ in page.tables for h in header]
    assert "observed" not in headers and "observed_value" not in headers and "score" not in headers
    rules_header, rules = next((h, r) for h, r in page.tables if h[:3] == ["rule", "statistic", "value"])
    by_rule = {r[0]: dict(zip(rules_header, r, strict=False)) for r in rules if r}
    if kind == "audit":
        ks = by_rule["score_ks"]
        assert ks["statistic"] == "KS p-value of the LIC scores, reference vs current"
        assert ks["value"] == "0.0042" and ks["limit"] == "0.01"
        assert by_rule["protected_drift"]["statistic"] == "Z-test p_value of 'sex' (Evidently)"
        assert by_rule["protected_drift"]["value"] == "0.0123"
        assert by_rule["max_flagged_fraction_increase"]["value"] == "9.50%"
        drift_header, drift_rows = next((h, r) for h, r in page.tables if h[:1] == ["column"] and "statistic" in h)
        assert dict(zip(drift_header, drift_rows[0], strict=False))["statistic"] == "Z-test p_value"
    else:
        assert by_rule["max_flagged_fraction"]["value"] == "47.00%" and by_rule["max_flagged_fraction"]["limit"] == "5.00%"
        assert by_rule["min_aux_quality"]["statistic"].startswith("auxiliary-model quality")
        assert by_rule["min_aux_quality"]["value"] == "0.8125"
        assert by_rule["tester:demographic_parity"]["statistic"] == "demographic parity difference"
        assert by_rule["tester:demographic_parity"]["value"] == "18.75%"
        expectations_header, rows = next((h, r) for h, r in page.tables if h[:1] == ["expectation"])
        row = dict(zip(expectations_header, rows[0], strict=False))
        assert row["statistic"] == "flagged fraction" and row["value"] == "47.00%"
    comparison_header, rows = next((h, r) for h, r in page.tables if h[:1] == ["tester"])
    fta = dict(zip(comparison_header, next(r for r in rows if r and r[0] == "fta"), strict=False))
    assert fta["value"] == "31.25%" and fta["per-individual threshold"] == "1" and fta["limit"] == "40.00%"
