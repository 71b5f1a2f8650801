"""The gate policy: what is tested, with which settings, and what fails a deployment.

Loaded from TOML and validated by pydantic in strict mode: unknown keys are errors (a typo must
never turn a check off silently), and so is a value of the wrong type (``true`` or ``"0.05"``
where a number belongs is never converted; an integer is accepted where a float is expected, as
TOML writes ``0`` for zero); NaN and infinity are refused. The shipped default,
``faux_checks/gate/policies/default.toml``, explains every number with the measurement behind it,
and every default there equals the code's (``tests/test_policy_strict.py``).
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, SerializeAsAny, ValidationError,
                      field_validator, model_serializer, model_validator)

from ..errors import InputError
from .tester_settings import TesterSettings

__all__ = ["Policy", "AttributeSettings", "AuxSettings", "FauxSettings", "TesterSettings", "ScaleSettings", "AuditSettings",
           "DecisionSettings", "OperationsSettings", "load_policy", "default_policy_path", "policy_path", "policy_errors", "recorded_policy",
           "SHIPPED_POLICIES"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _list_as_tuple(value):
    """TOML and JSON give arrays as lists; the policy keeps them as tuples (items still strictly typed)."""
    return tuple(value) if isinstance(value, list) else value


_Widths = Annotated[tuple[Annotated[int, Field(ge=1)], ...], BeforeValidator(_list_as_tuple)]
_Columns = Annotated[tuple[str, ...], BeforeValidator(_list_as_tuple)]


#: One linked column's declaration (faux_checks.baselines.linked_columns.parse_links checks it).
_LinkTable = dict[str, str | list[str] | dict[str, str | list[str]]]


def _check_link_tables(links: dict) -> dict:
    from ..baselines.linked_columns import parse_links

    try:
        parse_links(links)
    except InputError as exc:
        raise ValueError(str(exc)) from None
    return links


_LinkTables = Annotated[dict[str, _LinkTable], AfterValidator(_check_link_tables)]


#: Bounds of ``[aux] hidden``: the auxiliary model is a small MLP (64-64 by default); a width of millions of
#: units or hundreds of layers only costs memory and time (a resource bomb in a policy file).
MAX_AUX_LAYERS = 8
MAX_AUX_UNITS = 4096


class AuxSettings(_Strict):
    """Auxiliary-model training (see :class:`faux_checks.AuxiliaryModel`)."""

    hidden: _Widths = Field((64, 64), description=f"Hidden layer widths of the aux MLP (at most {MAX_AUX_LAYERS} "
                            f"layers of at most {MAX_AUX_UNITS} units).")
    epochs: int = Field(30, ge=1, le=1000, description="Maximum epochs (early stopping on held-out loss).")
    holdout: float = Field(0.2, gt=0, lt=1, description="Share of rows held out for early stopping and quality.")
    output_space: Literal["logit", "probability"] = Field(
        "logit", description="Aux output differentiated for J (docs/method.md, open point 1)."
    )
    max_train_rows: int = Field(200_000, ge=100, description="Rows sampled (seeded) to train the aux model.")

    @field_validator("hidden")
    @classmethod
    def _hidden_bounded(cls, hidden: tuple[int, ...]) -> tuple[int, ...]:
        wide = [f"layer {i + 1} has {w:,} units" for i, w in enumerate(hidden) if w > MAX_AUX_UNITS]
        if len(hidden) > MAX_AUX_LAYERS or wide:
            found = f"{len(hidden)} layers" if len(hidden) > MAX_AUX_LAYERS else "; ".join(wide)
            raise ValueError(f"found {list(hidden)[:12]}{' ...' if len(hidden) > 12 else ''} ({found}); expected at "
                             f"most {MAX_AUX_LAYERS} layers of at most {MAX_AUX_UNITS:,} units each (the default is "
                             "[64, 64])")
        return hidden


class FauxSettings(_Strict):
    """The fAux check itself.

    The default ``variant = "swap"`` scores each individual in probability points: the estimated
    change of the target's P(y = target_class) if only the protected attribute changed (docs/method.md,
    "The swap reading"). The paper's readings stay available in their own units: eq. 9 (``"faux"``,
    change of ŷ per unit of the aux log-odds), NG, IG and the Fig. 1 projection.
    """

    variant: Literal["swap", "faux", "ng", "ig", "projection"] = Field(
        "swap", description="swap: |Δŷ| in probability points when only c changes (default); faux: eq. 9; ng: eq. 10; "
        "ig: eq. 9 with integrated gradients; projection: the Fig. 1 reading ‖g‖·|cos(g, a)|.")
    delta: float = Field(..., gt=0, description="δ: an individual is flagged when its LIC score exceeds it "
                         "(variant swap: probability points, at most 1).")
    admissible: _Columns = Field(
        (), description="Variant swap: source columns the policy allows to differ between groups (resolving "
        "variables); the counterfactual holds them fixed. Empty: every feature may carry c (the strictest reading).")
    hold_uninformative: bool = Field(
        True, description="Variant swap: also hold fixed the columns that tell the auxiliary model nothing about c on "
        "its held-out rows (permutation test, 2 standard errors); they are listed in the report.")
    hold_independent: bool = Field(
        True, description="Variant swap: also hold fixed the columns whose distribution does not depend on c "
        "(chi-square test of independence, p >= 0.01): c does not cause them, even where the auxiliary model reads c "
        "from them given other columns (a proxy built from a legitimate feature, a declared mediator).")
    swap_metric: Literal["matched", "covariance", "explained", "between", "within", "diagonal", "euclidean"] = Field(
        "matched", description="Variant swap: how the free numeric columns move. 'matched' (the default): each takes the "
        "value of the person's own rank in the other group among people with the same held columns. Otherwise the "
        "auxiliary model's minimum-norm move (eq. 7–8) in a metric: the covariance c explains ('between': the groups' "
        "mean differences; 'explained': the same given the held columns), the covariance given the held columns "
        "('covariance', the reading before issue 20), its within-group part, its diagonal, or the identity.")
    swap_guard: float = Field(
        0.1, ge=0, le=10, description="Variant swap: Δx = M a Δv / (aᵀMa + guard × median aᵀMa): bounds the move of a row "
        "whose aux gradient barely meets the metric (0 = eq. 7–8's exact solve).")
    swap_steps: int = Field(1, ge=1, le=20, description="Variant swap: Newton steps toward the matched aux value.")
    swap_line_search: int = Field(
        2, ge=0, le=10, description="Variant swap: secant iterations along the step's direction so that the aux "
        "model's actual output reaches the matched value (0 = the linear step).")
    swap_evaluation: Literal["finite", "first_order"] = Field(
        "finite", description="Variant swap: the target's actual change, or its first-order value ∇f·Δx.")
    swap_categorical: Literal["coupled", "auto", "soft", "snap"] = Field(
        "coupled", description="Variant swap: a one-hot group switches level with the probabilities of a level model "
        "of the group given the admissible columns and c ('coupled': the score is the expected change and the flag a "
        "probability; docs/method.md, 'Categorical features'); or keeps the moved, fractional values ('soft'); or "
        "snaps to their largest entry ('snap'); 'auto' snaps for tree targets and is soft otherwise.")
    swap_coupling: Literal["auto", "comonotone", "gumbel"] = Field(
        "auto", description="Variant swap, swap_categorical = 'coupled': a person keeps their rank along the levels' "
        "likelihood-ratio order ('comonotone'), or their Gumbel noise of the level model ('gumbel'); 'auto' is "
        "comonotone for a continuous protected attribute and gumbel for groups.")
    continuous_matching: Literal["rank", "slope"] = Field(
        "rank", description="Variant swap, continuous protected attribute: the aux output moves to the value of the "
        "person's rank at c ± 1 sd ('rank'), or by one global regression slope ('slope').")
    max_flagged_fraction: float = Field(..., ge=0, le=1, description="Policy threshold on the flagged fraction.")
    ridge: float = Field(0.0, ge=0, description="Damping λ of (JJᵀ + λI) (docs/method.md, open point 2).")
    max_undefined_fraction: float = Field(
        0.01, ge=0, le=1, description="Above this share of undefined scores the gate is undecided."
    )
    ig_baseline: Literal["mean", "zeros"] = Field("mean", description="IG path start (variant 'ig').")
    ig_steps: int = Field(32, ge=2, le=512, description="IG steps (variant 'ig').")

    @model_validator(mode="after")
    def _swap_delta_in_probability_points(self) -> "FauxSettings":
        if self.variant == "swap" and self.delta >= 1:
            raise ValueError(f"delta {self.delta:g} is not a change of probability (variant 'swap' scores in "
                             "probability points: use a value in (0, 1), e.g. 0.1)")
        if self.admissible and self.variant != "swap":
            raise ValueError(f"admissible columns are a setting of variant 'swap', not of {self.variant!r}")
        return self


class AuditSettings(_Strict):
    """Limits of the scheduled drift audit of the deployed version (``flows/audit.py``).

    The audit compares the data the version was gated on (reference) with a current batch;
    exceeding any limit fails it (see :func:`faux_checks.audit.drift.run_audit`).
    """

    max_drifted_share: float = Field(
        0.5, ge=0, le=1, description="Largest share of compared columns (features and the protected attribute) that "
        "may drift (Evidently's per-column tests).")
    fail_on_protected_drift: bool = Field(True, description="A drifted protected attribute fails the audit by itself.")
    max_flagged_fraction_increase: float = Field(
        0.05, ge=0, le=1, description="Largest absolute increase of the flagged fraction, current batch vs reference.")
    max_group_flagged_fraction_increase: float = Field(
        0.10, ge=0, le=1, description="Largest absolute increase of a protected group's flagged fraction.")
    score_ks_pvalue: float = Field(
        0.01, gt=0, lt=1, description="Two-sample KS test on the LIC scores: p-value below this, together with "
        "score_ks_min_statistic, fails the audit.")
    score_ks_min_statistic: float = Field(
        0.1, ge=0, le=1, description="Smallest KS statistic that counts (at 10^5 rows a negligible shift is "
        "'significant').")
    fail_on_current_check: bool = Field(
        True, description="The gate's own rule on the current batch: a failed fAux check fails the audit.")
    max_roc_auc_drop: float | None = Field(
        None, ge=0, le=1, description="Largest ROC-AUC drop of the target model (labels needed); None = reported only.")
    max_rows: int | None = Field(
        20_000, ge=100, description="fAux check of each batch on at most this many rows (seeded sample); None = all.")
    min_rows: int = Field(100, ge=1, description="A current batch with fewer rows is undecided.")
    drift_method: str | None = Field(
        None, description="Evidently stat test for every column (e.g. 'psi', 'jensenshannon'); None = its per-type "
        "default.")
    drift_threshold: float | None = Field(None, gt=0, description="Threshold of drift_method; None = its default.")



class DecisionSettings(_Strict):
    """How counts and bounds become a decision (:func:`faux_checks.gate.decision.check_rules`).

    The flagged fraction counts every audited individual, an undefined score as flagged (the worst
    case). Its interval covers the individuals (Clopper–Pearson at ``confidence``) and the auxiliary
    model's randomness (``aux_seeds`` trainings scored on the same rows). ``rule = "interval"``: pass
    when the upper bound is at or below ``max_flagged_fraction``, fail when the lower bound is above
    it, undecided in between. ``rule = "upper_bound"``: pass when the upper bound is at or below the
    limit, fail otherwise (never undecided on the flagged fraction). Neither passes a gate that is unsure.
    The defaults are measured in ``faux_checks/gate/policies/default.toml`` (``benchmarks/bench_decision.py``).
    """

    rule: Literal["interval", "upper_bound"] = Field(
        "interval", description="interval: pass when the upper bound <= limit, fail when the lower bound > limit, "
        "else undecided; upper_bound: pass when the upper bound <= limit, else fail.")
    confidence: float = Field(
        0.95, ge=0.5, lt=1, description="Confidence level of the intervals (flagged fraction, auxiliary-model quality).")
    min_group_rows: int = Field(
        100, ge=1, description="Each protected group needs at least this many audited rows and this many of the "
        "auxiliary model's held-out rows; below it the decision is undecided (insufficient evidence).")
    aux_seeds: int = Field(
        3, ge=1, le=20, description="Trainings of the auxiliary model (seeds seed, seed+1, ...) whose flagged "
        "fractions widen the interval; 1 = the interval over individuals only. Not used with a given aux model.")
    aux_seed_rows: int = Field(
        20_000, ge=100, description="The extra seeds score a seeded sample of at most this many audited rows (the "
        "same rows for every seed); the spread they show widens the interval.")
    max_group_flagged_fraction: float | None = Field(
        None, ge=0, le=1, description="Largest flagged fraction of any one protected group, judged on the group's "
        "Clopper-Pearson interval (fail only when its lower bound exceeds the limit; Bonferroni over the groups). "
        "None = twice faux.max_flagged_fraction (at most 1); 1 = off.")
    max_group_flagged_ratio: float | None = Field(
        None, ge=1, description="Largest ratio of the most to the least flagged group's fraction, judged on the "
        "intervals (fail when the higher group's lower bound over the lower group's upper bound exceeds it); "
        "None = off.")
    max_newly_flagged_fraction: float | None = Field(
        None, ge=0, le=1, description="The 'no new harm' rule (faux_checks.gate.regression): the share of audit rows "
        "the candidate flags and the deployed version (the alias holder, gated on the same audit data) did not, judged "
        "on its Clopper-Pearson interval (fail when the lower bound is above it, undecided when the interval "
        "straddles it). None = the churn is reported, not gated: the absolute rule already bounds the newly flagged "
        "share by the flagged fraction, so a limit only adds a release choice (e.g. 0.01) that the user makes.")

    def group_flagged_limit(self, max_flagged_fraction: float) -> float:
        """``max_group_flagged_fraction`` as used: the given value, else ``min(1, 2 × max_flagged_fraction)``.

        Our reading of issue 22, item 5 for the default. The overall limit is a mean over the groups, so a
        small group can sit far above it under a pass (34% of a group holding 4.8% of the rows, at 4.6% overall).
        A per-group limit equal to the overall one would fail fair models by sampling alone in groups near the
        limit; twice the limit, judged on the lower bound, fails only a group clearly worse than what the
        policy accepts overall: at the shipped 5% it fails a group whose flagged fraction is above 10% with
        95% family-wise confidence, and passes a group at the overall limit whatever its size.
        """
        if self.max_group_flagged_fraction is not None:
            return float(self.max_group_flagged_fraction)
        return min(1.0, 2.0 * float(max_flagged_fraction))



class ScaleSettings(_Strict):
    """Streaming and sharded scoring of large files (``faux-checks score-large``, ``flows/shard.py``).

    Operational settings: the scores do not depend on ``workers``, ``threads_per_worker``,
    ``scheduler_address`` or ``shards_per_worker``; ``chunk_rows`` sets the batches rows are
    scored in (float rounding only). See :mod:`faux_checks.gate.stream`.
    """

    chunk_rows: int = Field(
        16_384, ge=256, description="Rows read, encoded and scored at a time; bounds memory (a chunk never crosses "
        "a Parquet row group). Measured (d = 100, 2x64 MLPs): 65,536 spent half its CPU time in page faults, "
        "temporaries above glibc's 32 MB mmap threshold being mapped and unmapped every chunk.")
    workers: int | None = Field(
        None, ge=0, description="Workers of the local Dask cluster; None = one per CPU core; 0 = score in this "
        "process without Prefect/Dask.")
    threads_per_worker: int = Field(1, ge=1, description="Threads per Dask worker (torch threads in each shard task).")
    scheduler_address: str | None = Field(
        None, description="Address of a running Dask scheduler (e.g. 'tcp://10.0.0.5:8786') instead of a local "
        "cluster; its workers must reach the data, model and work-folder paths.")
    shards_per_worker: int = Field(
        2, ge=1, le=64, description="Shards (contiguous Parquet row-group ranges) per worker thread.")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="Where the swap reading and the aux training run (--device overrides): 'auto' = CUDA when "
        "torch sees a GPU, else the CPU. Recorded in the provenance, not in the policy hash: CPU and CUDA scores "
        "agree within float32 rounding (tests/test_device.py).")


class OperationsSettings(_Strict):
    """How long a gate may take and how the registry client behaves (``[operations]``; decisions never depend on it).

    Not part of :meth:`Policy.sha256`: recorded decisions match their policy whatever these are.
    """

    deadline_s: float = Field(
        600.0, gt=0, le=86_400, description="Deadline of a whole `faux-checks gate` run (seconds; --deadline overrides): "
        "past it the gate stops, exits 2 and records nothing it did not finish. 10 minutes: a gate of one Adult-sized "
        "version takes 10-20 s on 2 cores and the 5-version demo 52-74 s, so a 15-minute schedule never overlaps itself.")
    registry_timeout_s: int = Field(
        10, ge=1, le=600, description="MLflow HTTP request timeout (MLFLOW_HTTP_REQUEST_TIMEOUT; client default 120).")
    registry_retries: int = Field(
        2, ge=0, le=10, description="MLflow HTTP retries per call (MLFLOW_HTTP_REQUEST_MAX_RETRIES; client default 7, "
        "about 4 minutes of retrying per call).")
    registry_backoff: int = Field(
        1, ge=0, le=120, description="MLflow HTTP backoff factor (MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR; client default 2): "
        "sleeps of 0, 2, 4 ... x this many seconds between retries.")
    prefect_timeout_s: int = Field(
        20, ge=1, le=600, description="Prefect API request timeout (PREFECT_API_REQUEST_TIMEOUT; client default 60); "
        "20 s, not the registry's 10: the temporary Prefect server answers slowly on a loaded 2-core machine.")
    prefect_retries: int = Field(
        2, ge=0, le=10, description="Prefect API retries per call (PREFECT_CLIENT_MAX_RETRIES; client default 5, "
        "exponential backoff: 60-70 s of retrying per call against a killed Prefect server, issue 25 fault 2).")
    # resource limits on what a user gives (issue 25, bad input 5): a file or column past them is refused, not read
    max_model_bytes: int = Field(
        1 << 30, ge=1 << 20, le=1 << 40, description="Largest model file, and largest total unpacked size of a model "
        "archive (.pt, .pt2, .skops), in bytes (1 GiB: a tabular model is far smaller; a 2 MB zip bomb once unpacked "
        "to 2.6 GB).")
    max_compression_ratio: float = Field(
        200.0, ge=2, le=1e6, description="Largest unpacked/packed size ratio of a model archive that unpacks to more "
        "than 16 MiB (zip bombs reach 1,000 and more; tensors compress 1-10x).")
    max_trees: int = Field(
        100_000, ge=1, le=10_000_000, description="Most trees in a LightGBM / XGBoost model file.")
    max_leaves: int = Field(
        1 << 20, ge=2, le=1 << 31, description="Most leaves (LightGBM num_leaves) or nodes / 2 (XGBoost) per tree; a "
        "4.5 KB LightGBM file with num_leaves=2000000000 aborted the gate.")
    max_tree_depth: int = Field(
        1000, ge=1, le=100_000, description="Deepest tree of an XGBoost JSON model (levels).")
    probe_memory_mb: int = Field(
        16_384, ge=256, le=1 << 22, description="Address-space limit (RLIMIT_AS, MiB) of the child process that loads "
        "a LightGBM / XGBoost / ONNX / skops file first; 0 of it reaches the gate if the loader aborts or explodes.")
    probe_timeout_s: float = Field(
        120.0, gt=0, le=3600, description="Seconds the probe process may take to load a model file.")
    max_levels: int = Field(
        1000, ge=2, le=10_000_000, description="Most levels of one categorical input column (one encoded feature "
        "each); a column of ~8,600 levels ran 15 minutes at ~10 GB without a decision.")


#: Joins the columns of an intersection into the name of its derived column (``sex×race``) and a row's values
#: into its cell label (``Female×Black``).
INTERSECTION_SEPARATOR = "×"


class AttributeSettings(_Strict):
    """One protected attribute of a gate that tests several (``[[attributes]]`` in the policy TOML).

    Each attribute gets its own check: its own auxiliary model, scores, rules and report section
    (:mod:`faux_checks.gate.attributes`). What is not set here is the policy's: ``[faux] admissible``
    (less the attribute itself), ``missing_protected``, every other section.
    """

    column: str = Field(..., min_length=1, description="The protected attribute's column.")
    kind: Literal["binary", "multiclass", "continuous"] | None = Field(
        None, description="binary, multiclass or continuous; inferred from the values when omitted "
        "(faux_checks.inputs.protected.encode_protected).")
    admissible: _Columns | None = Field(
        None, description="Variant swap: this attribute's admissible columns, replacing [faux] admissible; None = "
        "[faux] admissible less this column.")
    linked_columns: _LinkTables = Field(
        default_factory=dict, description="Columns tied to this attribute by definition: column -> {group: value}, "
        "{group: [values]} or {by = column, group: {value of that column: [values]}}; read by the linked_columns "
        "tester, which runs for the attributes that declare some.")


class Policy(_Strict):
    """The gate policy.

    Attributes mirror the top-level keys and the TOML sections ``[faux]``, ``[aux]``, ``[decision]``,
    ``[testers.*]``, ``[linked_columns]``, ``[audit]``, ``[scale]``; see ``faux_checks/gate/policies/default.toml`` for every default explained.
    """

    name: str = "default"
    protected: str | None = Field(None, description="Protected attribute column (one attribute); a policy that "
                                  "tests several declares [[attributes]] instead.")
    attributes: Annotated[tuple[AttributeSettings, ...], BeforeValidator(_list_as_tuple)] = Field(
        (), description="Several protected attributes, each checked on its own ([[attributes]] tables). With protected = "
        "\"COLUMN\" the loader reads that one as a list of one (dumped empty, as written).")
    intersections: Annotated[tuple[_Columns, ...], BeforeValidator(_list_as_tuple)] = Field(
        (), description="Intersections of declared binary/multi-class attributes, each checked as one multi-class "
        "attribute whose groups are the cells (e.g. [[\"sex\", \"race\"]] -> column 'sex×race').")
    label: str | None = Field(None, description="Label column (group metrics); excluded from features.")
    positive_label: str | None = Field(
        None, description="The label value meaning the positive class (text labels such as 'yes'); labels become 1 "
        "where equal, 0 elsewhere. Text labels without it are refused.")
    missing_protected: Literal["error", "drop"] = Field(
        "error", description="Rows with a missing protected value: stop (error) or drop and count them."
    )
    protected_kind: Literal["binary", "multiclass", "continuous"] | None = None
    target_output: Literal["auto", "logit", "probability", "softmax", "logits"] = "auto"
    target_class: int = Field(1, ge=0)
    min_aux_quality: float = Field(
        0.7, ge=0, le=1, description="The auxiliary model's held-out AUC (every group where it matters) or R² must "
        "reach this with the lower bound of its confidence interval; otherwise the gate is undecided.")
    max_rows: int | None = Field(None, ge=1, description="Audit at most this many rows (seeded sample); None = all.")
    seed: int = Field(0, ge=0, description="Seeds the auxiliary model, its hold-out split and every row sample.")
    faux: FauxSettings
    aux: AuxSettings = AuxSettings()
    testers: dict[str, SerializeAsAny[TesterSettings]] = Field(
        default_factory=dict, description="Each [testers.NAME] validated against the settings model of the entry NAME of "
        "faux_checks.gate.tester_table.TESTERS.")
    linked_columns: _LinkTables = Field(
        default_factory=dict, description="Columns tied to the protected attribute by definition: column -> "
        "{group: value} (e.g. relationship = { Male = \"Husband\", Female = \"Wife\" }), {group: [values]} (many "
        "values per group), or {by = column, group: {value of that column: [values]}}; read by the linked_columns tester.")
    scale: ScaleSettings = ScaleSettings()
    audit: AuditSettings = AuditSettings()
    decision: DecisionSettings = DecisionSettings()
    operations: OperationsSettings = OperationsSettings()

    @field_validator("testers", mode="before")
    @classmethod
    def _tester_settings(cls, value):
        """Each ``[testers.NAME]`` validated against its table entry's settings model (unknown names: below)."""
        from .tester_table import validate_settings

        return validate_settings(value)

    @model_validator(mode="after")
    def _known_testers(self) -> "Policy":
        from .tester_table import TESTERS

        known = set(TESTERS)
        unknown = set(self.testers) - known
        if unknown:
            raise ValueError(f"unknown tester(s) {sorted(unknown)}; known: {sorted(known)}")
        if self.protected in self.faux.admissible:
            raise ValueError(f"the protected attribute '{self.protected}' cannot be admissible")
        if self.protected in self.linked_columns:
            raise ValueError(f"the protected attribute '{self.protected}' cannot be one of its own linked columns")
        return self

    @model_validator(mode="after")
    def _one_or_several_attributes(self) -> "Policy":
        """Read ``protected`` (with ``protected_kind``, ``linked_columns``) as ``attributes = (that one,)``.

        Our reading of issue 21, item 1 (fairlearn normalises ``sensitive_features`` at its face): after
        validation :attr:`attributes` always lists every declared attribute, so consumers loop over it.
        The single-attribute form stays visible in :attr:`protected` (set only there) and is what the
        policy dumps and hashes (:meth:`_as_written`, :meth:`sha256`): recorded hashes and reports keep
        their values. The rewrite sets the field on the frozen model once, here, from values already
        validated (so an error is reported once, under the key the user wrote).
        """
        if self.protected is None and not self.attributes:
            raise ValueError("no protected attribute: set protected = \"COLUMN\" (one attribute) or declare "
                             "[[attributes]] tables with column = \"COLUMN\" (several)")
        if self.protected is not None:
            if self.attributes:
                raise ValueError(f"protected = {self.protected!r} and [[attributes]] {[a.column for a in self.attributes]} "
                                 "are both set; keep one (a policy with [[attributes]] names every protected "
                                 "attribute there)")
            if self.intersections:
                raise ValueError("intersections need [[attributes]] tables that declare their columns")
            links = {"linked_columns": self.linked_columns} if self.linked_columns else {}   # none: no torch import
            object.__setattr__(self, "attributes", (AttributeSettings(column=self.protected, kind=self.protected_kind,
                                                                      **links),))
        elif self.protected_kind is not None:
            raise ValueError("protected_kind applies to protected = ...; with [[attributes]] set each one's kind")
        elif self.linked_columns:
            columns = [a.column for a in self.attributes]
            raise ValueError("with [[attributes]], declare linked_columns in the attribute they belong to "
                             f"(e.g. [[attributes]] column = {columns[0]!r}, linked_columns = {{ ... }}), not at the top")
        columns = [a.column for a in self.attributes]
        duplicates = sorted({c for c in columns if columns.count(c) > 1})
        if duplicates:
            raise ValueError(f"attributes {duplicates} are declared more than once")
        for a in self.attributes:
            if a.admissible is not None and a.column in a.admissible:
                raise ValueError(f"the protected attribute '{a.column}' cannot be admissible")
            if a.column in a.linked_columns:
                raise ValueError(f"the protected attribute '{a.column}' cannot be one of its own linked columns")
        kinds = {a.column: a.kind for a in self.attributes}
        names = set()
        for cross in self.intersections:
            unknown = [c for c in cross if c not in kinds]
            if unknown:
                raise ValueError(f"intersection {list(cross)} names {unknown}, not declared in [[attributes]] "
                                 f"(declared: {columns})")
            if len(cross) < 2 or len(set(cross)) != len(cross):
                raise ValueError(f"intersection {list(cross)} needs at least two different attributes")
            continuous = [c for c in cross if kinds[c] == "continuous"]
            if continuous:
                raise ValueError(f"intersection {list(cross)}: {continuous} is continuous; intersections cross "
                                 "groups (bin the attribute into a multi-class column first)")
            name = INTERSECTION_SEPARATOR.join(cross)
            if name in names or name in kinds:
                raise ValueError(f"intersection {list(cross)} is declared more than once")
            names.add(name)
        linked = self.testers.get("linked_columns")
        if linked is not None and linked.enabled and not any(a.linked_columns for a in self.attributes):
            raise ValueError("tester linked_columns is enabled but the policy declares no [linked_columns] table, e.g. "
                             "relationship = { Male = \"Husband\", Female = \"Wife\" }" if self.protected is not None
                             else "tester linked_columns is enabled but no attribute declares linked_columns")
        return self

    @model_serializer(mode="wrap")
    def _as_written(self, handler):
        """The policy as the user wrote it: a ``protected = "..."`` policy dumps ``attributes`` empty, as it did
        before the loader rewrote it (``report.json``'s ``policy``, recorded policies, :meth:`sha256`)."""
        data = handler(self)
        if self.protected is not None and "attributes" in data:
            data["attributes"] = data["attributes"][:0]
        return data

    @property
    def reports_per_attribute(self) -> bool:
        """Whether outputs carry one section per attribute (a policy written with ``[[attributes]]``).

        False for ``protected = "..."``: its report, ``--json`` object, tags and records keep the shape
        they had before ``[[attributes]]`` existed (the one check, no ``attributes`` section).
        """
        return self.protected is None

    @property
    def attribute_names(self) -> list[str]:
        """The protected attributes checked, in order: declared columns, then intersections (``sex×race``)."""
        return [a.column for a in self.attributes] + [INTERSECTION_SEPARATOR.join(c) for c in self.intersections]

    def single_protected(self, what: str) -> str:
        """The one protected attribute of a path that checks one at a time.

        Raises
        ------
        InputError
            The policy declares [[attributes]]: names them and the layer that checks several.
        """
        if self.protected is not None:
            return self.protected
        raise InputError(f"{what} checks one protected attribute; this policy declares {len(self.attribute_names)} "
                         f"({', '.join(self.attribute_names)}): run them through faux_checks.gate.attributes."
                         "check_attributes, or give a policy with protected = \"COLUMN\"")

    def attribute_policies(self) -> dict[str, "Policy"]:
        """One single-attribute policy per protected attribute (:attr:`attribute_names` order).

        A policy with ``protected`` gives an equal copy of itself. With ``[[attributes]]`` each attribute's policy
        has ``protected`` = its column and ``protected_kind`` = its kind, its own admissible columns
        (default: ``[faux] admissible`` less itself) and its own ``linked_columns`` (the
        ``linked_columns`` tester is disabled for an attribute that declares none). An
        intersection's policy names its derived column (``sex×race``, multi-class; the caller adds
        the column, :func:`faux_checks.gate.attributes.add_intersections`), holds none of its
        components admissible, and declares no linked columns.
        """
        base = self.model_dump()
        base.update(attributes=(), intersections=())

        def one(column: str, kind, admissible, linked) -> Policy:
            payload = {**base, "protected": column, "protected_kind": kind, "linked_columns": linked,
                       "faux": {**base["faux"], "admissible": tuple(admissible)}}
            if not linked and "linked_columns" in payload["testers"]:
                payload["testers"] = {**payload["testers"],
                                      "linked_columns": {**payload["testers"]["linked_columns"], "enabled": False}}
            return Policy.model_validate(payload)

        out = {}
        for a in self.attributes:
            admissible = a.admissible if a.admissible is not None else [c for c in self.faux.admissible if c != a.column]
            out[a.column] = one(a.column, a.kind, admissible, a.linked_columns)
        for cross in self.intersections:
            admissible = [c for c in self.faux.admissible if c not in cross]
            out[INTERSECTION_SEPARATOR.join(cross)] = one(INTERSECTION_SEPARATOR.join(cross), "multiclass", admissible, {})
        return out

    def sha256(self) -> str:
        """Hash of the canonical JSON form (provenance).

        ``attributes``, ``intersections`` and ``positive_label`` count only when set, so a one-attribute policy keeps the
        hash it had before they existed (recorded decisions still match their policy); ``operations``
        never counts.
        """
        payload = self.model_dump(mode="json")
        payload.pop("operations")           # deadlines and timeouts never change a decision
        payload["scale"].pop("device", None)  # nor does the device (recorded in the provenance; issue 23)
        for key in ("attributes", "intersections", "positive_label"):
            if not payload[key]:
                payload.pop(key)
        if payload["decision"].get("max_newly_flagged_fraction") is None:   # the hash it had before the rule existed
            payload["decision"].pop("max_newly_flagged_fraction", None)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def with_overrides(self, **changes) -> "Policy":
        """A copy with top-level fields replaced (validated again)."""
        return Policy.model_validate({**self.model_dump(), **changes})


SHIPPED_POLICIES = ("default", "adult")


def policy_path(name: str = "default") -> Path:
    """Path of a shipped policy TOML: ``"default"`` (generic) or ``"adult"`` (the bundled demo's declarations)."""
    if name not in SHIPPED_POLICIES:
        raise InputError(f"no shipped policy named {name!r}; shipped: {list(SHIPPED_POLICIES)}")
    return Path(__file__).parent / "policies" / f"{name}.toml"


def default_policy_path() -> Path:
    """Path of the shipped default policy TOML."""
    return policy_path("default")


def load_policy(path: str | Path | None = None, **overrides) -> Policy:
    """Read and validate a policy TOML (the shipped default when ``path`` is None).

    Parameters
    ----------
    path : str or Path, optional
    **overrides
        Top-level fields to replace, e.g. ``protected="sex"``.

    Raises
    ------
    InputError
        Unreadable file, TOML syntax error, or a validation error: each key named with the value
        found, its type and what is expected (:func:`policy_errors`).
    """
    path = Path(path) if path is not None else default_policy_path()
    try:
        payload = tomllib.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read policy {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"policy {path} is not valid TOML: {exc}") from exc
    payload.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Policy.model_validate(payload)
    except ValidationError as exc:
        raise InputError(f"policy {path} is invalid: {policy_errors(exc)}") from None


#: Keys renamed since policies were first recorded by gates: (old path, new path). A recorded policy is
#: read with these applied, so that a version gated earlier can still be audited with its own policy.
RENAMED_KEYS = ((("audit", "min_group_rows"), ("decision", "min_group_rows")),)


def recorded_policy(policy_json: str) -> Policy:
    """A policy recorded by an earlier gate (JSON), read with :data:`RENAMED_KEYS` applied.

    A renamed key moves to its new place unless that place is already set; everything else is
    validated as strictly as a policy file.

    Raises
    ------
    InputError
        Not JSON, or invalid: each key named with the value found, its type and what is expected.
    """
    try:
        payload = json.loads(policy_json)
    except json.JSONDecodeError as exc:
        raise InputError(f"the recorded policy is not valid JSON: {exc}") from exc
    for (old_section, old_key), (new_section, new_key) in RENAMED_KEYS:
        section = payload.get(old_section)
        if isinstance(section, dict) and old_key in section:
            value = section.pop(old_key)
            payload.setdefault(new_section, {}).setdefault(new_key, value)
    try:
        return Policy.model_validate(payload)
    except ValidationError as exc:
        raise InputError(f"the recorded policy is invalid: {policy_errors(exc)}") from None


_TOML_TYPES = {bool: "boolean", str: "string", int: "integer", float: "float", list: "array", tuple: "array",
               dict: "table", type(None): "nothing"}
_EXPECTED = {"float_type": "a number (float or integer)", "float_parsing": "a number (float or integer)",
             "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
             "bool_type": "a boolean (true or false)", "bool_parsing": "a boolean (true or false)",
             "string_type": "a string", "tuple_type": "an array", "list_type": "an array", "dict_type": "a table",
             "model_type": "a table", "model_attributes_type": "a table", "finite_number": "a finite number"}


def policy_errors(exc: ValidationError) -> str:
    """Each validation error as "key: found VALUE (TYPE); expected WHAT", joined by "; ".

    ``key`` is the dotted TOML path (``faux.max_flagged_fraction``); TYPE is the TOML type of the
    value found; WHAT the type expected, the allowed values or the bound that failed.
    """
    problems = []
    for e in exc.errors():
        key = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in e["loc"]).lstrip(".") or "(policy)"
        if e["type"] == "extra_forbidden":
            problems.append(f"{key}: unknown key (a typo would turn a setting off silently); remove or rename it")
            continue
        if e["type"] == "missing":
            problems.append(f"{key}: required, not given")
            continue
        if e["type"] == "value_error":                  # a rule across keys (a model validator): its own words
            problems.append(f"{key}: {e['msg'].removeprefix('Value error, ')}")
            continue
        value = e.get("input")
        found = "true" if value is True else "false" if value is False else repr(value)
        kind = _TOML_TYPES.get(type(value), type(value).__name__)
        expected = _EXPECTED.get(e["type"]) or e["msg"].removeprefix("Input should be").strip()
        shown = found if len(found) <= 80 else found[:77] + "..."
        problems.append(f"{key}: found {shown} ({kind}); expected {expected}")
    return "; ".join(problems)
