"""The protected-attribute kinds table, ``KINDS``: what each kind of c is and what it allows.

A protected attribute c is *binary* (two groups), *multiclass* (2 to ``MAX_GROUPS`` groups when declared; detected from 3) or
*continuous* (a real number, e.g. age). The kind decides the auxiliary model's head and loss, its
quality metric, whether rows can be split into groups (group testers, stratified holdouts, the
per-group table) and how a counterfactual value is chosen. Code outside the maths reads the capability
flags below (``grouped``, ``n_outputs``, ``group_counts``, ``quality_metric``) instead of comparing kind
strings, and ``Kind`` is written here alone.

Adding a kind is one entry here plus its maths: the auxiliary model's head/loss
(``method/auxiliary.py``), the counterfactual value (``method/counterfactual.py``, ``goals.py``,
``matching.py``, ``swap.py`` and the other swap modules), the held-out quality of a given aux model
(``gate/aux_model.py``) and detection from the data (``inputs/protected.py``); the gate's other
consumers read the flags. Source: our reading of the paper's setting (sec. 3, c binary or categorical; continuous c
is this project's extension, docs/method.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import InputError

__all__ = ["KINDS", "MAX_GROUPS", "Kind", "ProtectedKind", "protected_kind"]

Kind = Literal["binary", "multiclass", "continuous"]
MAX_GROUPS = 20


@dataclass(frozen=True)
class ProtectedKind:
    """One kind of protected attribute and its capabilities.

    Attributes
    ----------
    name : {"binary", "multiclass", "continuous"}
    grouped : bool
        c takes one of a few group labels (stored as class indices 0..k-1). False: c is a real
        number; group testers do not apply, holdouts are not stratified and the report's groups
        are quartile bins.
    group_counts : tuple of (int, int) or None
        Smallest and largest number of groups the kind accepts (None when not grouped).
    quality_metric : str
        The auxiliary model's held-out quality: ``roc_auc`` (binary), ``roc_auc_ovr`` (one row per
        group, multiclass), ``r2`` (continuous).
    multi_output : bool
        The auxiliary model has one output per group (softmax); otherwise one output (the logit
        of group 1, or the standardised value).
    """

    name: str
    grouped: bool
    group_counts: tuple[int, int] | None
    quality_metric: str
    multi_output: bool

    def n_outputs(self, n_groups: int) -> int:
        """Number of auxiliary-model outputs k for ``n_groups`` groups: k groups when multi-output, else 1."""
        return int(n_groups) if self.multi_output else 1


KINDS: dict[str, ProtectedKind] = {k.name: k for k in (
    ProtectedKind("binary", grouped=True, group_counts=(2, 2), quality_metric="roc_auc", multi_output=False),
    ProtectedKind("multiclass", grouped=True, group_counts=(2, MAX_GROUPS), quality_metric="roc_auc_ovr",
                  multi_output=True),
    ProtectedKind("continuous", grouped=False, group_counts=None, quality_metric="r2", multi_output=False),
)}


def protected_kind(name: str) -> ProtectedKind:
    """The ``KINDS`` entry for ``name``.

    Raises
    ------
    InputError
        ``name`` is not a kind; the message lists the kinds.
    """
    try:
        return KINDS[name]
    except KeyError:
        raise InputError(f"protected attribute kind must be one of {sorted(KINDS)}, got {name!r}") from None
