"""One in-memory verb with a rich result, for notebooks: :func:`check` -> :class:`FairnessCheck`.

``faux_checks.check(model, df, protected="sex")`` takes the model as the data scientist holds it
(:func:`~faux_checks.inputs.estimators.as_target`: a Pipeline on raw rows, a booster, a torch module), one or
several protected attributes, and the shipped policy or one of theirs, and returns a result that displays itself
in Jupyter (``_repr_html_``: the decision, the flagged fraction's interval, the rules, the by-group table and the
score chart), reads as DataFrames (``.rules``, ``.by_group``, ``.scores``), plots (``.plot()``) and saves the full
report page (``.save_html()``). The engine is :func:`~faux_checks.gate.attributes.check_attributes` for one or
several attributes (one attribute's section is :func:`~faux_checks.gate.one_attribute.check_one_attribute`'s own), unchanged; this
module only reads its result.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .errors import InputError
from .gate.policy import Policy, load_policy

__all__ = ["FairnessCheck", "check"]


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (tqdm's notebook bar works there; elsewhere bars go to logs)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def check(model, data: pd.DataFrame, *, protected: str | Sequence[str] | None = None,
          policy: Policy | str | Path | None = None, label: str | None = None, positive_label: str | None = None,
          favourable_label: str | None = None, feature_spec=None, progress: bool | None = None,
          protected_file: str | Path | pd.DataFrame | None = None, join_on: str | None = None) -> "FairnessCheck":
    """Check ``model`` for individual fairness on ``data`` and return a result that displays itself.

    Parameters
    ----------
    model : torch module, scikit-learn estimator or Pipeline, XGBoost or LightGBM model
        Read through :func:`~faux_checks.inputs.estimators.as_target` (a Pipeline starting with a ColumnTransformer
        is given the raw rows).
    data : DataFrame of shape (n, any)
        Audit rows: the model's source columns, the protected column(s) and optionally the label. Never modified.
    protected : str or sequence of str, optional
        The protected attribute column, or several (each checked with its own auxiliary model, one decision).
        Required unless ``policy`` names them.
    policy : Policy, or path of a policy TOML, optional
        Default: the shipped policy (its demo label dropped unless ``label`` is given).
    label, positive_label : str, optional
        The label column (kept out of the model's inputs) and, for text labels, the positive class.
    favourable_label : str, optional
        The label value that is good for the person (``"no"`` on a deny label): the direction of the group table
        and of the per-group sentences (policy ``favourable_label``).
    feature_spec : FeatureSpec, optional
        The encoding; not needed for a Pipeline with a ColumnTransformer.
    progress : bool, optional
        Progress bars; default: on in a Jupyter kernel (tqdm's notebook bar), off elsewhere (no tqdm lines in logs).
    protected_file : path or DataFrame, optional
        The protected column(s) in a separate file (CSV or Parquet) or frame, with the key ``join_on``; ``data`` then
        holds the key and no protected column (policy ``[protected_file]``, :mod:`faux_checks.gate.unmatched`: c joined
        by the key, never a model input; rows without a match refused unless the policy excludes them).
    join_on : str, optional
        The key column of ``data`` and ``protected_file`` (default: the policy's ``[protected_file] join_on``).

    Returns
    -------
    FairnessCheck

    Raises
    ------
    InputError
        No protected attribute named anywhere; everything :func:`~faux_checks.gate.one_attribute.check_one_attribute` refuses.
    """
    policy = _policy(policy, protected, label, positive_label, favourable_label)
    progress = _in_notebook() if progress is None else bool(progress)
    from .inputs.estimators import as_target

    target, spec = as_target(model, feature_spec)
    from .gate.attributes import check_attributes

    policy, rows = _linked_policy(policy, protected_file, join_on)
    if policy.protected_file is not None:
        from .gate.unmatched import check_linked_attributes

        result = check_linked_attributes(target, data, policy=policy, protected_rows=rows, feature_spec=spec,
                                         progress=progress)
    elif policy.protected_probabilities is not None:   # c as per-row probabilities: multiple imputation
        from .gate.estimated import check_estimated

        result = check_estimated(target, data, policy=policy, feature_spec=spec, progress=progress)
    else:
        result = check_attributes(target, data, policy=policy, feature_spec=spec, progress=progress)
    return FairnessCheck(result, policy,
                         index=data.index if isinstance(data, pd.DataFrame) else None)


def _linked_policy(policy: Policy, protected_file, join_on: str | None) -> tuple[Policy, pd.DataFrame | None]:
    """The policy with ``protected_file`` / ``join_on`` on its ``[protected_file]`` section, and the protected rows
    when given as a frame (None: read from the section's path)."""
    if protected_file is None and join_on is None:
        return policy, None
    rows = protected_file if isinstance(protected_file, pd.DataFrame) else None
    section = dict(policy.protected_file.model_dump()) if policy.protected_file is not None else {}
    if protected_file is not None and rows is None:
        section["path"] = str(protected_file)
    if join_on is not None:
        section["join_on"] = join_on
    if not section.get("join_on") or (rows is None and not section.get("path")):
        raise InputError("a linked protected file needs both protected_file= (a path or a DataFrame) and join_on= "
                         "(the key column of both), or a policy with [protected_file] path and join_on")
    return policy.with_overrides(protected_file=section), rows


def _policy(policy, protected, label, positive_label, favourable_label=None) -> Policy:
    """The policy as used: given (object or path) or shipped, with ``protected``/``label`` applied."""
    given = policy is not None
    if policy is None or isinstance(policy, (str, Path)):
        policy = load_policy(policy)
    if not isinstance(policy, Policy):
        raise InputError(f"policy must be a faux_checks.Policy or the path of a policy TOML, got {type(policy).__name__}")
    changes: dict[str, Any] = {}
    if isinstance(protected, str):
        changes.update(protected=protected, attributes=[])
    elif protected is not None:
        names = list(protected)
        if not names:
            raise InputError("protected is an empty list; name at least one protected attribute column")
        changes.update(protected=None, attributes=[{"column": str(c)} for c in names])
    elif not given:
        raise InputError("name the protected attribute: check(model, df, protected='sex') (or several: "
                         "protected=['sex', 'race']), or pass a policy that names it")
    if label is not None:
        changes["label"] = label
    elif not given:
        changes["label"] = None       # the shipped policy names the demo's label; the user's data need not have it
    if positive_label is not None:
        changes["positive_label"] = positive_label
    if favourable_label is not None:
        changes["favourable_label"] = favourable_label
    return policy.with_overrides(**changes) if changes else policy


class FairnessCheck:
    """The result of :func:`check`: read-only, rich in a notebook, plain DataFrames for code.

    Attributes
    ----------
    result : AttributesResult
        The engine's result over every protected attribute, unchanged (``result["sex"]``: one attribute's
        :class:`~faux_checks.gate.result.CheckResult`).
    policy : Policy
        The policy as used.
    index : pandas Index or None
        The index of the ``data`` checked (its labels label :attr:`scores`'s rows); None: positions 0..n-1.
    decision, exit_code, reasons
        As the engine's (``"passed"`` 0, ``"failed"`` 1, ``"undecided"`` 2).
    """

    def __init__(self, result, policy: Policy, index: pd.Index | None = None):
        self.result = result
        self.policy = policy
        self.index = index

    # ---------------------------------------------------------------- the engine's outcome
    @property
    def decision(self) -> str:
        return self.result.decision

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    @property
    def reasons(self) -> list[str]:
        return list(self.result.reasons)

    @property
    def _checks(self) -> dict[str, Any]:
        """Attribute name -> CheckResult (one entry for one attribute)."""
        return {s.attribute: s.check for s in self.result.sections}

    # ---------------------------------------------------------------- DataFrames
    @property
    def rules(self) -> pd.DataFrame:
        """One row per rule: ``rule``, ``status``, ``observed``, ``limit``, ``detail`` (and ``attribute`` for several)."""
        columns = ["rule", "status", "observed", "limit", "detail"]
        frame = pd.DataFrame(list(self.result.rules))
        if "attribute" in frame.columns:
            columns = ["attribute"] + columns
        return frame.reindex(columns=columns)

    @property
    def by_group(self) -> pd.DataFrame:
        """Per protected group: ``n``, ``flagged``, ``flagged_fraction`` (undefined counted), ... ; indexed by
        (attribute, group)."""
        parts = []
        for name, res in self._checks.items():
            if res.by_group is None:
                continue
            part = res.by_group.reset_index()
            part.insert(0, "attribute", name)
            parts.append(part)
        if not parts:
            return pd.DataFrame(columns=["attribute", "group", "n", "flagged_fraction"]).set_index(["attribute", "group"])
        return pd.concat(parts, ignore_index=True).set_index(["attribute", "group"])

    @property
    def scores(self) -> pd.DataFrame:
        """One row per input row of ``data``, indexed as ``data`` is (a filtered or shuffled frame keeps its labels,
        so ``df.assign(s=result.scores["lic_score"])`` and joins align each person with their own score):
        ``lic_score`` (NaN: not audited or undefined) and ``flag_probability`` (1/0, a probability for coupled
        levels; NaN: not audited or undefined), per attribute with several (columns ``lic_score[sex]``...)."""
        checks = self._checks
        out = {}
        for name, res in checks.items():
            suffix = "" if len(checks) == 1 else f"[{name}]"
            out[f"lic_score{suffix}"] = np.asarray(res.scores, dtype=np.float64)
            out[f"flag_probability{suffix}"] = np.asarray(res.flag_probability, dtype=np.float64)
        return pd.DataFrame(out, index=self.index)

    # ---------------------------------------------------------------- display
    def __repr__(self) -> str:
        return repr(self.result)

    def _report(self) -> dict:
        from .report.build import build_report

        res = self.result
        return build_report(decision=res.decision, reasons=list(res.reasons), check=res.deciding.check.to_dict(),
                            rules=list(res.rules), attributes=[s.to_dict() for s in res.sections],
                            policy=self.policy.model_dump(mode="json"), policy_sha256=self.policy.sha256())

    def _repr_html_(self) -> str:
        """Decision banner, interval, rules, by-group table and the score chart, escaped and self-contained."""
        from .report.html import DECISION_COLOURS, UNDECIDED_COLOUR
        from .report.plots import render_plots

        colour = DECISION_COLOURS.get(self.decision, UNDECIDED_COLOUR)
        lines = [f"<div style='border-left:6px solid {colour};padding:4px 10px'>",
                 f"<b style='color:{colour}'>{html.escape(self.decision.upper())}</b> "
                 f"(exit {self.exit_code}) &mdash; {html.escape(repr(self))}</div>"]
        for name, res in self._checks.items():
            iv = res.interval
            if iv is not None:
                lines.append(f"<p><b>{html.escape(str(name))}</b>: flagged {res.flagged_fraction:.2%} "
                             f"(CI {iv.lower:.2%}&ndash;{iv.upper:.2%}) of {res.n_individuals:,} at "
                             f"&delta; = {res.delta:g}, limit {res.max_flagged_fraction:.2%}</p>")
        rules = self.rules.drop(columns=["detail"]).assign(detail=self.rules["detail"].str.slice(0, 240))
        lines.append("<h4>Rules</h4>" + rules.to_html(index=False, escape=True, na_rep="–"))
        lines.append("<h4>By group</h4>" + self.by_group.to_html(escape=True, float_format="{:.4g}".format, na_rep="–"))
        plot = render_plots(self._report()).get("score_histogram")
        if plot:
            lines.append(f"<img alt='LIC score distribution' src='{plot}' style='max-width:640px'/>")
        return "\n".join(lines)

    def plot(self, ax=None, *, kind: str = "groups"):
        """A matplotlib chart: ``kind="groups"``: flagged fraction per group with the overall and per-group limits;
        ``kind="scores"``: the LIC score histogram with δ. Returns the Axes.

        Raises
        ------
        InputError
            An unknown ``kind``.
        """
        import matplotlib.pyplot as plt

        if kind not in ("groups", "scores"):
            raise InputError(f"plot kind must be 'groups' or 'scores', got {kind!r}")
        if ax is None:
            _, ax = plt.subplots(figsize=(6.4, 3.2))
        from .report.plots import score_axis_label

        if kind == "scores":
            for name, res in self._checks.items():
                values = np.asarray(res.scores, dtype=np.float64)
                ax.hist(values[np.isfinite(values)], bins=50, alpha=0.6, label=str(name))
            delta = self.policy.faux.delta
            ax.axvline(delta, color="crimson", ls="--", label=f"δ = {delta:g}")
            ax.set_xlabel(score_axis_label(self._report()))
            ax.set_ylabel("individuals")
            ax.legend(fontsize=8)
            return ax
        frame = self.by_group.reset_index()
        labels = [f"{a}={g}" if len(self._checks) > 1 else str(g) for a, g in zip(frame["attribute"], frame["group"], strict=True)]
        ax.bar(labels, frame["flagged_fraction"], color="tab:blue")
        limit = self.policy.faux.max_flagged_fraction
        group_limit = self.policy.decision.group_flagged_limit(limit)
        ax.axhline(limit, color="crimson", ls="--", label=f"max_flagged_fraction {limit:.0%}")
        if group_limit < 1:
            ax.axhline(group_limit, color="darkorange", ls=":", label=f"max_group_flagged_fraction {group_limit:.0%}")
        ax.set_ylabel("flagged fraction")
        ax.legend(fontsize=8)
        return ax

    def save_html(self, path: str | Path) -> Path:
        """Write the full, self-contained report page (the CLI's ``report.html``) to ``path``, whole or not at all;
        never overwrites, never writes through a symbolic link (:func:`faux_checks._files.write_whole`).

        Raises
        ------
        InputError
            Something is at ``path`` already: a file, a folder or a symbolic link (a dangling one too).
        """
        from ._files import refuse_existing, write_whole
        from .report.html import render_html

        path = Path(path)
        try:
            refuse_existing(path)
            page = render_html(self._report())
            write_whole(path, page, replace=False)
        except FileExistsError as exc:
            raise InputError(f"{path} {exc.strerror}; choose another path (nothing is overwritten)") from None
        return path
