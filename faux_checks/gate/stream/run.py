"""One streaming run over N ≥ 1 protected attributes: :func:`score_stream` (source -> sample -> plan -> score -> decide)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping

from ...errors import InputError
from ...inputs.tabular import FeatureSpec
from ..policy_schema import Policy
from .outcome import StreamResult, summarize
from ..sections import attribute_paths
from .passes import prepare_attributes, sample_pass, score_pass, stream_attributes
from .plan import resolve_feature_spec
from .score import ScoresWriter
from .source import DataSource, check_rows

__all__ = ["score_stream"]


def _score_into(target_model, prepared: Mapping, source: DataSource, attributes, paths: Mapping[str, Path], *,
                progress: bool) -> dict:
    """The score pass into each attribute's scores file; every file appears only when all of them are complete."""
    writers: dict[str, ScoresWriter] = {}
    committed: list[Path] = []
    try:
        for a in attributes:
            writers[a.name] = ScoresWriter(paths[a.name])
        counts = score_pass(target_model, {n: aux for n, (_, aux) in prepared.items()}, source,
                            {n: plan for n, (plan, _) in prepared.items()}, attributes, writers, progress=progress)
        for w in writers.values():
            committed.append(w.commit())
    except BaseException:
        for w in writers.values():
            w.abort()
        for done in committed:      # this run's own files: a failed run leaves none that looks complete
            done.unlink(missing_ok=True)
        raise
    return counts


def score_stream(target_model, source_path: str | Path, *, policy: Policy, out_path: str | Path,
                 feature_spec: FeatureSpec | None = None, aux_model=None, aux_models: Mapping[str, Any] | None = None,
                 chunk_rows: int | None = None, progress: bool = False, model_info: dict | None = None,
                 sep: str | None = None, thousands: str | None = None, decimal: str | None = None) -> StreamResult:
    """Score every row of a large Parquet/CSV file with fAux in bounded memory, for every protected attribute, in this process.

    Parameters
    ----------
    target_model : torch.nn.Module or TorchScript module
        Maps the encoded features (n, d) to the declared output (policy ``target_output``).
    source_path : str or Path
        ``.parquet`` (read by row group) or CSV (``pd.read_csv(chunksize=...)``). Not modified.
    policy : Policy
        ``protected = "..."`` or ``[[attributes]]`` (and ``intersections``): δ, limits, aux settings,
        seed; ``policy.scale.chunk_rows`` is the default chunk size.
    out_path : str or Path
        The scores output (``.parquet`` or CSV): ``row``, ``lic_score``, ``flagged``, ``status``
        (``scored`` / ``undefined`` / ``not_audited``), ``group``; one row per input row, in input
        order. ``protected = "..."`` writes ``out_path`` itself; ``[[attributes]]`` one file per
        attribute beside it (:func:`faux_checks.gate.sections.attribute_paths`). Never overwritten; written under
        ``<name>.partial`` until the run succeeds.
    feature_spec : FeatureSpec, optional
        Without it the numeric columns of the first chunk are used as they are, less every declared
        protected column and the label.
    aux_model : AuxiliaryModel or torch module, optional
        The auxiliary model of a policy with one protected attribute; trained once on the bottom-k
        sample when omitted (module docstring of :mod:`faux_checks.gate.stream`).
    aux_models : mapping, optional
        A given auxiliary model per attribute name; the others are trained on their own sample.
    chunk_rows : int, optional
        Rows per chunk; bounds memory (default ``policy.scale.chunk_rows``).
    progress : bool
        Progress bars (aux training, scores).
    model_info : dict, optional
        Added to the provenance.
    sep, thousands, decimal : str, optional
        The CSV delimiter, thousands and decimal marks; default sniffed (:func:`faux_checks.inputs.io.sniff_sep`,
        :func:`faux_checks.inputs.io.csv_number_marks`); every thousands-marked value is checked for groups of 3
        digits (:func:`faux_checks.inputs.io.check_thousands`).

    Returns
    -------
    StreamResult
        One section per attribute (``result["sex"]`` is its :class:`~.summary.StreamSummary`), one decision.

    Raises
    ------
    InputError
        As :func:`faux_checks.gate.one_attribute.check_one_attribute` (prefixed with the attribute when several are
        checked), plus an existing output path, an intersection's derived name already a column of
        the data, and ``aux_model`` given for a policy with several attributes.

    Notes
    -----
    fAux: Castiglione et al. 2022, eq. 9-10 (arXiv 2210.06288). Peak memory ≈ the training samples
    (attributes × ``max_train_rows`` × d float32) + one chunk's gradients and Jacobians.
    """
    t0, t_wall = time.perf_counter(), time.time()
    aux_models = _aux_models_by_name(policy, aux_model, aux_models)
    chunk_rows = int(chunk_rows or policy.scale.chunk_rows)
    paths = attribute_paths(out_path, policy)
    target_model, source, spec, attributes = _open_source(target_model, source_path, policy, feature_spec,
                                                          chunk_rows=chunk_rows, sep=sep, thousands=thousands,
                                                          decimal=decimal)
    samples = sample_pass(source, attributes, feature_spec=spec, chunk_rows=chunk_rows)
    t1 = time.perf_counter()
    prepared = prepare_attributes(target_model, samples, attributes, feature_spec=spec, chunk_rows=chunk_rows,
                                  aux_models=aux_models, progress=progress)
    del samples
    t2 = time.perf_counter()
    counts = _score_into(target_model, prepared, source, attributes, paths, progress=progress)
    t3 = time.perf_counter()
    first = min((c.first_score_at for c in counts.values() if c.first_score_at), default=None)
    timings = {"sample": t1 - t0, "aux": t2 - t1, "score": t3 - t2, "merge": 0.0, "total": t3 - t0,
               "first_score": (first - t_wall) if first else None}
    return summarize(counts, {n: plan for n, (plan, _) in prepared.items()}, attributes, source=source, out_paths=paths, timings=timings,
                     model_info={"workers": 0, **(model_info or {})})


def _aux_models_by_name(policy: Policy, aux_model, aux_models: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The given auxiliary models by attribute name: ``aux_model`` is the one attribute's, ``aux_models`` any of them.

    Raises
    ------
    InputError
        ``aux_model`` given for a policy with several attributes (each has its own: pass ``aux_models``).
    """
    names = policy.attribute_names
    if aux_model is None:
        return aux_models
    if len(names) > 1:
        raise InputError(f"aux_model gives one auxiliary model, but the policy checks {', '.join(names)}, each "
                         "with its own; pass aux_models={attribute: model}")
    return {names[0]: aux_model}


def _open_source(target_model, source_path: str | Path, policy: Policy, feature_spec: FeatureSpec | None, *,
                 chunk_rows: int, sep: str | None, thousands: str | None, decimal: str | None):
    """The source and how it is read: the target and its feature spec (given, the target's own, or the numeric
    columns of the first chunk), every row checked against the spec, and the attributes to stream.

    Returns ``(target_model, source, spec, attributes)``; raises InputError as :func:`score_stream` says.
    """
    from ...inputs.estimators import as_target

    target_model, feature_spec = as_target(target_model, feature_spec)   # a skops Pipeline brings its own spec
    source = DataSource.open(source_path, sep=sep, thousands=thousands, decimal=decimal)
    spec = resolve_feature_spec(source, policy, feature_spec, chunk_rows=chunk_rows)
    check_rows(source, spec, chunk_rows=max(chunk_rows, 65_536))
    return target_model, source, spec, stream_attributes(policy, source.columns)
