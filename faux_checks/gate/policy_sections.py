"""The policy's sections: one strict pydantic model per TOML table (``[faux]``, ``[aux]``, ``[decision]``, ...).

Strict mode: unknown keys are errors (a typo must never turn a check off silently), and so is a value of
the wrong type (``true`` or ``"0.05"`` where a number belongs is never converted; an integer is accepted
where a float is expected, as TOML writes ``0`` for zero); NaN and infinity are refused. The top-level
model that holds these sections is :class:`faux_checks.gate.policy_schema.Policy`; reading files is
:mod:`faux_checks.gate.policy`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from ..errors import InputError

__all__ = ["StrictSection", "AuditSettings", "AuxSettings", "Columns", "DecisionSettings", "FauxSettings", "LinkTables",
           "list_as_tuple", "MAX_AUX_LAYERS", "MAX_AUX_UNITS", "OperationsSettings", "ProtectedFileSettings",
           "ProtectedProbabilitiesSettings", "ScaleSettings"]


class StrictSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def list_as_tuple(value):
    """TOML and JSON give arrays as lists; the policy keeps them as tuples (items still strictly typed)."""
    return tuple(value) if isinstance(value, list) else value


_Widths = Annotated[tuple[Annotated[int, Field(ge=1)], ...], BeforeValidator(list_as_tuple)]
Columns = Annotated[tuple[str, ...], BeforeValidator(list_as_tuple)]


#: One linked column's declaration (faux_checks.baselines.linked_columns.parse_links checks it).
_LinkTable = dict[str, str | list[str] | dict[str, str | list[str]]]


def _check_link_tables(links: dict) -> dict:
    from ..baselines.linked_columns import parse_links

    try:
        parse_links(links)
    except InputError as exc:
        raise ValueError(str(exc)) from None
    return links


LinkTables = Annotated[dict[str, _LinkTable], AfterValidator(_check_link_tables)]


#: Bounds of ``[aux] hidden``: the auxiliary model is a small MLP (64-64 by default); a width of millions of
#: units or hundreds of layers only costs memory and time (a resource bomb in a policy file).
MAX_AUX_LAYERS = 8
MAX_AUX_UNITS = 4096


class AuxSettings(StrictSection):
    """Auxiliary-model training (see :class:`faux_checks.AuxiliaryModel`)."""

    hidden: _Widths = Field((64, 64), description=f"Hidden layer widths of the aux MLP (at most {MAX_AUX_LAYERS} "
                            f"layers of at most {MAX_AUX_UNITS} units).")
    epochs: int = Field(30, ge=1, le=1000, description="Maximum epochs (early stopping on held-out loss).")
    holdout: float = Field(0.2, gt=0, lt=1, description="Share of rows held out for early stopping and quality.")
    output_space: Literal["logit", "probability"] = Field(
        "logit", description="Aux output differentiated for J (docs/method.md, open point 1)."
    )
    max_train_rows: int = Field(200_000, ge=100, description="Rows sampled (seeded) to train the aux model.")
    cross_fit_folds: int = Field(
        5, ge=0, le=20, description="Folds of the cross-fitted auxiliary model on a small audit (the single split's "
        "held-out part leaves a protected group under decision.min_group_rows): one aux model per fold, trained on "
        "the other folds, scores the fold's rows; quality, held-out counts and the holds' tests read every audited "
        "row out of fold (faux_checks.gate.crossfit). 0 or 1 = always the single split.")

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


class FauxSettings(StrictSection):
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
                         "(variant swap: probability points, at most 1; a value target, target_output = 'value': "
                         "in the output's own unit, named by unit).")
    unit: str | None = Field(
        None, min_length=1, max_length=40, description="The unit of the target's output and of delta when the target "
        "returns a value (target_output = 'value': a regression output or a score, e.g. \"EUR\" for a credit limit); "
        "required then, refused for a classifier (δ in probability points has no unit).")
    cutoff: float | None = Field(
        None, allow_inf_nan=False, description="A value target's business cut-off, in unit (e.g. 650 for a score "
        "approved at 650 or more): the check also reads each person as crossing the cut-off when their "
        "counterfactual output lies on the other side of it than their actual output (faux_checks.gate.cutoff); "
        "that share gates at max_flagged_fraction beside the δ reading. Variant swap and target_output = 'value' only.")
    cutoff_side: Literal["above", "below"] | None = Field(
        None, description="Which side of cutoff is the favourable outcome for the person: 'above' (an output at or "
        "above the cut-off: a score approved at 650 or more) or 'below' (an output below it: a risk score declined at "
        "the cut-off or above). Required with cutoff; never guessed.")
    admissible: Columns = Field(
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
        "('covariance', the first round's reading), its within-group part, its diagonal, or the identity.")
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
        "comonotone for a continuous protected attribute and gumbel for groups, and leaves a check undecided when the "
        "two couplings give different decisions (rule level_coupling); a named coupling decides.")
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
        if self.variant == "swap" and self.delta >= 1 and self.unit is None:
            raise ValueError(f"delta {self.delta:g} is not a change of probability (variant 'swap' scores in "
                             "probability points: use a value in (0, 1), e.g. 0.1; for a target that returns a value in its own unit, "
                             "set target_output = 'value' and [faux] unit, e.g. unit = \"EUR\")")
        if self.cutoff is not None and self.variant != "swap":
            raise ValueError(f"cutoff = {self.cutoff:g} is read on each person's counterfactual output, which only "
                             f"variant 'swap' computes (variant {self.variant!r} is a gradient reading): set variant = "
                             "'swap' or remove cutoff")
        if (self.cutoff is None) != (self.cutoff_side is None):
            raise ValueError("cutoff and cutoff_side go together: cutoff_side names the favourable side of the "
                             "cut-off ('above' or 'below'), e.g. cutoff = 650 with cutoff_side = \"above\" for a score "
                             "approved at 650 or more; " + ("set cutoff_side" if self.cutoff_side is None
                                                             else "set cutoff or remove cutoff_side"))
        if self.admissible and self.variant != "swap":
            raise ValueError(f"admissible columns are a setting of variant 'swap', not of {self.variant!r}")
        return self


class AuditSettings(StrictSection):
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



class DecisionSettings(StrictSection):
    """How counts and bounds become a decision (:func:`faux_checks.gate.check_rules.check_rules`).

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

        Our reading for the default. The overall limit is a mean over the groups, so a
        small group can sit far above it under a pass (34% of a group holding 4.8% of the rows, at 4.6% overall).
        A per-group limit equal to the overall one would fail fair models by sampling alone in groups near the
        limit; twice the limit, judged on the lower bound, fails only a group clearly worse than what the
        policy accepts overall: at the shipped 5% it fails a group whose flagged fraction is above 10% with
        95% family-wise confidence, and passes a group at the overall limit whatever its size.
        """
        if self.max_group_flagged_fraction is not None:
            return float(self.max_group_flagged_fraction)
        return min(1.0, 2.0 * float(max_flagged_fraction))



class ScaleSettings(StrictSection):
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
        "agree within float32 rounding (tests/method/test_device.py).")


class OperationsSettings(StrictSection):
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
        "exponential backoff: 60-70 s of retrying per call against a killed Prefect server).")
    # resource limits on what a user gives: a file or column past them is refused, not read
    max_model_bytes: int = Field(
        1 << 30, ge=1 << 20, le=1 << 40, description="Largest model file, and largest total unpacked size of a model "
        "archive (.pt, .pt2, .skops), in bytes (1 GiB: a tabular model is far smaller; a 2 MB zip bomb can unpack "
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
        "a LightGBM / XGBoost / ONNX / skops file first; 0 of it reaches the gate if the loader aborts or explodes. "
        "Never more than the runner's own limit (`ulimit -v`): under a lower one the probe takes that, and a load that "
        "fails under it names the runner's limit, not the file.")
    probe_timeout_s: float = Field(
        120.0, gt=0, le=3600, description="Seconds the probe process may take to load a model file, counted from the "
        "end of its library's import (the interpreter's start and the import are bounded apart, 600 s).")
    max_levels: int = Field(
        1000, ge=2, le=10_000_000, description="Most levels of one categorical input column (one encoded feature "
        "each); a column of ~8,600 levels ran 15 minutes at ~10 GB without a decision.")



class ProtectedFileSettings(StrictSection):
    """The protected attribute held in a separate file, linked to the audit rows by a key (``[protected_file]``).

    The audit data then holds no protected column: :mod:`faux_checks.inputs.linked` joins the file's protected
    column(s) onto the audit rows by ``join_on`` for the auxiliary model and the group statistics only; the key and
    the protected column never enter the target model's inputs or the scores file. Audit rows whose key the file
    does not hold are unmatched: ``refuse`` stops the check (exit 3, the count named); ``exclude`` checks the
    matched rows and bounds the flagged fraction over all rows (:mod:`faux_checks.gate.unmatched`).
    """

    path: str | None = Field(
        None, min_length=1, description="The file with the join key and the protected column(s) (CSV or Parquet; "
        "relative to the working directory; --protected-file overrides).")
    join_on: str = Field(..., min_length=1, description="The key column, in both files (--join-on overrides); unique "
                         "in the protected file, never an input of the target model.")
    unmatched: Literal["refuse", "exclude"] = Field(
        "refuse", description="Audit rows without a match in the protected file: 'refuse' stops the check naming "
        "the count (exit 3); 'exclude' checks the matched rows and decides on the bound [l(1-u), h(1-u)+u] of the "
        "flagged fraction over all rows, [l, h] the matched rows' interval and u the unmatched share.")
    max_unmatched_share: float = Field(
        0.05, ge=0, lt=1, description="With unmatched = 'exclude', the largest unmatched share; above it the check "
        "is refused as with 'refuse' (a bound that wide decides little).")


class ProtectedProbabilitiesSettings(StrictSection):
    """The protected attribute given only as per-row group probabilities (``[protected_probabilities]``).

    The audit data holds no protected column but one probability column per group (an estimate such as BISG's:
    Elliott et al. 2009, "Using the Census Bureau's surname list to improve estimates of race/ethnicity");
    :mod:`faux_checks.gate.estimated` checks the model by multiple imputation (Rubin 1987): ``draws`` completed
    data sets, c drawn per row from its probabilities, each checked as if c were known, the flagged fractions
    combined with Rubin's rules. A pass needs probabilities at least ``min_sharpness`` sharp (their expected ROC-AUC
    against c drawn from them); blunter ones can fail a model, never pass it.
    """

    column: str = Field(..., min_length=1, description="The protected attribute's name as reported (e.g. 'race'); "
                        "never a column of the audit data.")
    groups: dict[str, str] = Field(
        ..., min_length=2, description="Group -> its probability column in the audit data, e.g. { black = "
        "\"p_black\", white = \"p_white\" }; at least two groups, each row's probabilities in [0, 1] summing to 1.")
    draws: int = Field(5, ge=2, le=100, description="Completed data sets (multiple imputations, M); each trains its "
                       "own auxiliary model, so the check costs about M single checks.")
    min_sharpness: float = Field(
        0.9, ge=0.5, le=1.0, description="The expected ROC-AUC of the probabilities against c drawn from them "
        "(one-vs-rest macro for more than two groups) a pass needs; under it the gate is undecided at best "
        "(blunt probabilities under-read the flagged fraction, docs/benchmark.md).")

    @field_validator("groups")
    @classmethod
    def _distinct_columns(cls, value: dict[str, str]) -> dict[str, str]:
        columns = list(value.values())
        doubled = sorted({c for c in columns if columns.count(c) > 1})
        if doubled:
            raise ValueError(f"[protected_probabilities] groups name the column(s) {doubled} for more than one group; "
                             "give each group its own probability column")
        empty = sorted(g for g, c in value.items() if not str(c).strip() or not str(g).strip())
        if empty:
            raise ValueError(f"[protected_probabilities] groups {empty} have an empty name or column")
        return value
