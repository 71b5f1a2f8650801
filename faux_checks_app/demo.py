"""Demo model versions on UCI Adult: what a model team would push through the gate over time.

:func:`build_demo_versions` trains and exports (TorchScript) income classifiers that differ in one
documented way each, plus the feature specs and an audit dataset, so that the gate, the CLI and
the flows can be run end to end on real data:

==== ================================================ ============================================
name labels                                           inputs
==== ================================================ ============================================
v1   as recorded                                      ADULT_FEATURES (no sex)
v2   historical bias against women (see below)        ADULT_FEATURES (no sex)
v3   as recorded                                      ADULT_FEATURES + sex
v4   historical bias against women                    ADULT_FEATURES + sex
v5   as recorded                                      ADULT_FEATURES (no sex), relationship
                                                      canonicalised: Husband and Wife -> Spouse
==== ================================================ ============================================

Nothing here decides whether a version passes: the decision is the gate's, from its policy (the
demo uses ``faux_checks/gate/policies/adult.toml``). Beside each decision the demo shows the
**definitional truth** (:mod:`faux_checks.groundtruth.definitional`): the share of audited people
whose predicted probability moves by more than δ when only their sex changes and ``relationship``
follows it (Husband ↔ Wife), everything else fixed. It is exact for married people and a lower
bound for the rest; by it v1–v4 are individually unfair (v1 favours wives, v2 disfavours them) and
v5, which cannot see Husband/Wife, is not.

Historical bias (:func:`faux_checks.groundtruth.labels.inject_historical_bias`) is label bias: the
outcome of some qualified women was recorded as unfavourable. v2 never sees sex; it can only
reproduce the bias through proxies (relationship above all).

:func:`measure_demo_versions` (``python -m faux_checks_app.demo --seeds 0 1 2``) gives the measurements
behind the Adult policy's numbers: for each version the gate's own check (:func:`faux_checks.gate.one_attribute.check_one_attribute`)
with a policy, and the definitional truth. Measured 2026-12-01 (seeds 0, 1, 2; 15,060 audit rows;
δ = 0.1; flagged = estimated |Δŷ| > δ; truth = definitional |Δŷ| > δ):

======= ===================== ===================== ===================== ==================
version Adult policy flagged  truth (all rows)      truth (married rows)  default policy
======= ===================== ===================== ===================== ==================
v1      13.1–13.8% (failed)   10.7–15.6%            23–34%                47.0–54.8% (failed)
v2      34.8–37.6% (failed)   33.0–35.9%            72–79%                54.7–63.5% (failed)
v3      17.5–20.3% (failed)   17.9–21.3%            25–34%                51.8–56.2% (failed)
v4      44.7–49.1% (failed)   45.0–49.5%            73–80%                59.1–65.0% (failed)
v5      0.4–1.3% (passed)     0%                    0%                    45.0–50.8% (failed)
======= ===================== ===================== ===================== ==================

The default policy declares nothing admissible, so it counts the use of every feature correlated
with sex; the Adult policy declares every feature but relationship admissible.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from faux_checks._threads import one_torch_thread
from faux_checks._validation import fmt_count
from faux_checks.errors import InputError
from faux_checks.groundtruth.definitional import ADULT_LINKS, definitional_fairness_scores, linked_rows
from faux_checks.groundtruth.labels import inject_historical_bias
from faux_checks.inputs.datasets import ADULT_FEATURES, load_adult
from faux_checks.inputs.models import load_model, save_torchscript
from faux_checks.inputs.tabular import FeatureSpec
from faux_checks.method._batching import as_tensor

__all__ = [
    "AUDIT_FILENAME",
    "CANONICAL_RELATIONSHIP",
    "DEFAULT_BIAS_RATE",
    "DemoVersion",
    "TargetMLP",
    "build_demo_versions",
    "definitional_truth",
    "measure_demo_versions",
    "train_target",
]

#: Share of the women's positive (>50K) training labels flipped to 0 in v2 and v4: the women's
#: >50K rate in training falls from 11.4% to 2.8% (the rate at which v2's demographic-parity gap
#: clearly exceeds v1's over seeds, measured in the first demo).
DEFAULT_BIAS_RATE = 0.75
#: File name of the audit dataset written by :func:`build_demo_versions` in its workdir.
AUDIT_FILENAME = "adult_audit.csv"
#: Rare levels (fewer training rows than this) are grouped: rare native-country levels were measured
#: to carry 44–52% of a target's squared gradient as noise (docs/method.md).
MIN_FREQUENCY = 50
#: v5's intervention: the two relationship values that name sex by definition become one.
CANONICAL_RELATIONSHIP = {"relationship": {"Husband": "Spouse", "Wife": "Spouse"}}


class TargetMLP(nn.Module):
    """Income classifier: an MLP x ↦ one logit (log-odds of income >50K).

    Parameters
    ----------
    d : int
        Number of encoded input features.
    hidden : sequence of int
        Hidden layer widths (ReLU).

    Input shape (b, d) float32; output shape (b,), the logit (declare the target's output form
    as ``"logit"``).
    """

    def __init__(self, d: int, hidden: Sequence[int] = (64, 64)):
        super().__init__()
        layers: list[nn.Module] = []
        width = int(d)
        for h in hidden:
            layers += [nn.Linear(width, int(h)), nn.ReLU()]
            width = int(h)
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x)[:, 0]


def train_target(
    X,
    y,
    *,
    epochs: int = 20,
    seed: int = 0,
    lr: float = 1e-3,
    batch_size: int = 512,
    hidden: Sequence[int] = (64, 64),
) -> TargetMLP:
    """Train a :class:`TargetMLP` with Adam on the binary cross-entropy; deterministic per seed.

    Parameters
    ----------
    X : array or Tensor of shape (n, d)
        Encoded features (e.g. ``FeatureSpec.encode``).
    y : array-like of shape (n,)
        Labels in {0, 1}.
    epochs, lr, batch_size, hidden : training settings (no early stopping, no weight decay).
    seed : int
        Seeds the initialisation and the batch order; the global torch RNG is left as it was.
        Training runs on one torch thread (the previous setting is restored), so the same data
        and seed give bit-identical weights on any machine with the same torch build.

    Returns
    -------
    TargetMLP
        In eval mode.

    Raises
    ------
    InputError
        Shapes differ, X is not finite, or y holds values other than 0 and 1.
    """
    X = as_tensor(X)
    labels = np.asarray(y, dtype=np.float64)
    n, d = X.shape
    if labels.shape != (n,):
        raise InputError(f"X has {fmt_count(n)} rows but y has shape {labels.shape}; expected ({n},)")
    if n == 0:
        raise InputError("train_target: no training rows")
    if not torch.isfinite(X).all():
        raise InputError("X holds NaN or infinite values; encode and clean the data first")
    if not np.isin(labels, (0.0, 1.0)).all():
        raise InputError(f"y must hold only 0 and 1, found {sorted(np.unique(labels))[:10]}")
    if epochs < 1 or batch_size < 1:
        raise InputError(f"epochs and batch_size must be >= 1, got {epochs} and {batch_size}")
    target = torch.as_tensor(labels, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TargetMLP(d, hidden)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    with one_torch_thread():
        for _ in range(epochs):
            perm = torch.randperm(n, generator=gen)
            for start in range(0, n, batch_size):
                idx = perm[start : start + batch_size]
                opt.zero_grad()
                loss = nn.functional.binary_cross_entropy_with_logits(model(X[idx]), target[idx])
                loss.backward()
                opt.step()
    model.eval()
    return model


@dataclass(frozen=True)
class DemoVersion:
    """One demo model version, as a model team would register it.

    Attributes
    ----------
    name : str
        ``"v1"``, ``"v2"``, ...
    description : str
        One sentence: what changed in this version.
    model_path : Path
        TorchScript file (load with :func:`faux_checks.inputs.models.load_model`); output: one logit.
    spec_path : Path
        FeatureSpec JSON that encodes a DataFrame into the model's inputs.
    audit_path : Path
        The audit dataset CSV (shared by all versions; holds ``sex`` and ``income``).
    recipe : dict
        Training recipe: data, labels, bias injection, feature columns, hyper-parameters, seed.
    """

    name: str
    description: str
    model_path: Path
    spec_path: Path
    audit_path: Path
    recipe: dict = field(default_factory=dict)

    @property
    def uses_protected(self) -> bool:
        """Whether the protected attribute is one of the model's input columns."""
        return self.recipe.get("protected", "sex") in self.recipe.get("feature_columns", ())

    def to_dict(self) -> dict:
        """JSON-serialisable dict (paths as strings)."""
        d = asdict(self)
        for key in ("model_path", "spec_path", "audit_path"):
            d[key] = str(d[key])
        return d


def build_demo_versions(
    workdir: str | Path,
    *,
    seed: int = 0,
    bias_rate: float = DEFAULT_BIAS_RATE,
    epochs: int = 20,
) -> list[DemoVersion]:
    """Train and export the demo model versions v1–v5 on UCI Adult (see module docstring).

    Data: :func:`faux_checks.inputs.datasets.load_adult` without missing values. Training rows: UCI's
    adult.data split (30,162 rows). Audit rows: UCI's adult.test split (15,060 rows), never used
    for training, written to ``workdir / AUDIT_FILENAME`` with all columns (``sex`` and ``income``
    included, ``split`` dropped).

    FeatureSpecs fitted on the training rows over :data:`ADULT_FEATURES` (numeric columns
    standardised, categorical ones one-hot, levels with fewer than 50 training rows grouped into
    ``__infrequent__``): ``adult-spec.json`` (v1, v2), ``adult-spec-with-sex.json`` (v3, v4: ``sex``
    appended as the last column) and ``adult-spec-canonical.json`` (v5: ``relationship`` values
    Husband and Wife read as Spouse, :data:`CANONICAL_RELATIONSHIP`). Every spec reads the same raw
    audit file.

    Parameters
    ----------
    workdir : str or Path
        Created if missing. Nothing in it is overwritten: existing output files raise InputError.
    seed : int
        Seeds the training of every version and the bias injection.
    bias_rate : float
        Share of women's >50K training labels flipped to 0 in v2 and v4.
    epochs : int
        Training epochs of every version (Adam, lr 1e-3, batch 512, 2×64 ReLU MLP).

    Returns
    -------
    list of DemoVersion
        In version order. A ``manifest.json`` in ``workdir`` records the same.

    Notes
    -----
    Cost: 5 trainings of 20 epochs on one thread, about 15 s on a loaded 2-core machine.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    _refuse_existing(workdir)
    data = load_adult(drop_missing=True)
    train = data[data["split"] == "train"].drop(columns="split").reset_index(drop=True)
    audit = data[data["split"] == "test"].drop(columns="split").reset_index(drop=True)
    audit_path = workdir / AUDIT_FILENAME
    audit.to_csv(audit_path, index=False)
    specs, paths = _fit_specs(train, workdir)
    plan = _version_plan(train, audit, bias_rate=bias_rate, seed=seed, epochs=epochs)
    versions = []
    for name, description, which, yv, recipe in plan:
        spec = specs[which]
        model = train_target(spec.encode(train), yv.to_numpy(), epochs=epochs, seed=seed)
        path = save_torchscript(model, workdir / f"{name}.pt")
        recipe = {**recipe, "feature_columns": spec.source_columns, "feature_spec": spec.name}
        versions.append(DemoVersion(name, description, path, paths[which], audit_path, recipe))
    manifest = {"schema_version": 1, "versions": [v.to_dict() for v in versions], "audit_path": str(audit_path)}
    (workdir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return versions


def _refuse_existing(workdir: Path) -> None:
    """Raise :class:`InputError` naming every output file ``workdir`` already holds (nothing is overwritten)."""
    outputs = ["adult-spec.json", "adult-spec-with-sex.json", "adult-spec-canonical.json", AUDIT_FILENAME,
               "manifest.json"] + [f"{v}.pt" for v in ("v1", "v2", "v3", "v4", "v5")]
    existing = [name for name in outputs if (workdir / name).exists()]
    if existing:
        raise InputError(f"{workdir} already holds {existing}; build_demo_versions never overwrites, use an empty folder")


def _fit_specs(train: pd.DataFrame, workdir: Path) -> tuple[dict[str, FeatureSpec], dict[str, Path]]:
    """The three encodings (``plain``, ``sex``, ``canonical``) fitted on the training rows, and the files saved."""
    features = list(ADULT_FEATURES)
    specs = {
        "plain": FeatureSpec.fit(train, features, min_frequency=MIN_FREQUENCY, name="adult-features"),
        "sex": FeatureSpec.fit(train, features + ["sex"], min_frequency=MIN_FREQUENCY, name="adult-features-with-sex"),
        "canonical": FeatureSpec.fit(train, features, min_frequency=MIN_FREQUENCY, aliases=CANONICAL_RELATIONSHIP,
                                     name="adult-features-canonical-relationship"),
    }
    paths = {"plain": specs["plain"].save(workdir / "adult-spec.json"),
             "sex": specs["sex"].save(workdir / "adult-spec-with-sex.json"),
             "canonical": specs["canonical"].save(workdir / "adult-spec-canonical.json")}
    return specs, paths


def _version_plan(train: pd.DataFrame, audit: pd.DataFrame, *, bias_rate: float, seed: int,
                  epochs: int) -> list[tuple[str, str, str, pd.Series, dict]]:
    """One ``(name, description, encoding, labels, recipe)`` per version v1–v5: the labels trained on (recorded, or
    with historical bias against women, :func:`~faux_checks.groundtruth.labels.inject_historical_bias`) and the
    recipe recorded with it."""
    y = train["income"]
    y_biased = inject_historical_bias(train, rate=bias_rate, seed=seed)
    n_flipped = int((y - y_biased).sum())

    common = {
        "dataset": "UCI Adult (CC BY 4.0), faux_checks.inputs.datasets.load_adult(drop_missing=True)",
        "train_rows": f"split == 'train' (UCI adult.data), {len(train)} rows",
        "audit_rows": f"split == 'test' (UCI adult.test), {len(audit)} rows, {AUDIT_FILENAME}",
        "protected": "sex",
        "model": "TargetMLP(d, hidden=(64, 64)), output: one logit of P(income > 50K)",
        "epochs": epochs, "lr": 1e-3, "batch_size": 512, "hidden": [64, 64], "seed": seed,
        "min_frequency": MIN_FREQUENCY,
    }
    recorded = {"labels": "income as recorded (1 = >50K)"}
    biased = {
        "labels": "income with historical bias against women",
        "bias": {
            "function": "faux_checks.groundtruth.labels.inject_historical_bias",
            "protected": "sex", "disadvantaged": "Female", "rate": bias_rate, "seed": seed,
            "flipped": n_flipped,
            "rule": "exactly round(rate * m) of the m training rows with sex == Female and income == 1, "
                    "chosen uniformly at random, set to income = 0; no other label changed",
        },
    }
    recorded, biased = {**common, **recorded}, {**common, **biased}
    return [
        ("v1", "Income classifier on the recorded labels; sex is not an input.", "plain", y, recorded),
        ("v2", f"Retrained on historically biased labels ({bias_rate:.0%} of women's >50K labels recorded "
               "as <=50K); sex is not an input, so the bias can only reach the model through proxies.",
         "plain", y_biased, biased),
        ("v3", "Recorded labels, with sex added as an input column.", "sex", y, recorded),
        ("v4", f"Historically biased labels ({bias_rate:.0%} of women's >50K labels flipped) and sex as an "
               "input column.", "sex", y_biased, biased),
        ("v5", "Recorded labels; sex is not an input and relationship is canonicalised (Husband and Wife read as "
               "Spouse), so the value that names sex by definition is gone.", "canonical", y,
         {**recorded, "aliases": CANONICAL_RELATIONSHIP}),
    ]


def definitional_truth(version: DemoVersion, *, delta: float, audit: pd.DataFrame | None = None) -> dict:
    """The version's definitional ground truth: shares of audited people whose ŷ moves by more than δ.

    Sex flipped and relationship mapped Husband ↔ Wife, everything else fixed
    (:func:`faux_checks.groundtruth.definitional.definitional_fairness_scores`).

    Returns
    -------
    dict
        ``share`` (all rows), ``share_married`` (rows holding Husband or Wife, where the truth is exact),
        ``n`` and ``n_married``.
    """
    audit = pd.read_csv(version.audit_path) if audit is None else audit
    spec = FeatureSpec.load(version.spec_path)
    model = load_model(version.model_path)

    def predict(frame: pd.DataFrame) -> np.ndarray:
        with torch.no_grad():
            return torch.sigmoid(model(torch.as_tensor(spec.encode(frame))).double()).numpy()

    ifs = definitional_fairness_scores(predict, audit, links=ADULT_LINKS)
    married = linked_rows(audit, links=ADULT_LINKS)
    return {"share": float(np.mean(ifs > delta)), "share_married": float(np.mean(ifs[married] > delta)),
            "n": int(len(ifs)), "n_married": int(married.sum())}


def measure_demo_versions(versions: Sequence[DemoVersion], *, policies: dict) -> pd.DataFrame:
    """Measure each version with the gate's own check under each policy, beside its definitional truth.

    Parameters
    ----------
    versions : sequence of DemoVersion
    policies : dict of label -> Policy
        E.g. the shipped default (no admissible columns) and the Adult policy.

    Returns
    -------
    DataFrame
        One row per version and policy: the decision, the flagged fraction overall and per group, the
        linked-columns tester's flagged fraction (when the policy runs it), demographic parity, the aux
        quality, and the truth at the policy's δ (all rows and married rows).
    """
    from faux_checks.gate.one_attribute import check_one_attribute

    if not versions:
        raise InputError("no versions to measure")
    audit = pd.read_csv(versions[0].audit_path)
    rows = []
    for v in versions:
        spec = FeatureSpec.load(v.spec_path)
        model = load_model(v.model_path)
        for label, policy in policies.items():
            result = check_one_attribute(model, audit, policy=policy, feature_spec=spec)
            truth = definitional_truth(v, delta=policy.faux.delta, audit=audit)
            groups = result.by_group["flagged_fraction"] if result.by_group is not None else {}
            row = {"version": v.name, "policy": label, "decision": result.decision,
                   "flagged": result.flagged_fraction, "truth": truth["share"],
                   "truth_married": truth["share_married"], "aux_quality": result.aux_quality,
                   **{f"flagged_{g}": float(f) for g, f in dict(groups).items()}}
            for name in ("linked_columns", "demographic_parity", "fta"):
                if name in result.testers and result.testers[name].get("value") is not None:
                    row[name] = result.testers[name]["value"]
            rows.append(row)
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m faux_checks_app.demo``: build the versions for each seed and print the measurements."""
    import tempfile

    from faux_checks import load_policy
    from faux_checks.gate.policy import policy_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--bias-rate", type=float, default=DEFAULT_BIAS_RATE)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the built versions here (one folder per seed)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the aux model and scoring")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    policies = {"default": load_policy(policy_path("default")), "adult": load_policy(policy_path("adult"))}
    tables = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.workdir or Path(tmp)
        for seed in args.seeds:
            versions = build_demo_versions(root / f"seed{seed}", seed=seed, bias_rate=args.bias_rate)
            table = measure_demo_versions(versions, policies={k: p.with_overrides(seed=seed)
                                                              for k, p in policies.items()})
            table.insert(0, "seed", seed)
            tables.append(table)
    with pd.option_context("display.width", 250, "display.max_columns", 60):
        print(pd.concat(tables, ignore_index=True).round(4).to_string(index=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
