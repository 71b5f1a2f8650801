"""Several protected attributes through the stream: one sample pass, one score pass, one decision.

The in-memory layer (:mod:`faux_checks.gate.attributes`) runs one ``run_check`` per attribute and
intersection and decides once over their prefixed rules. The stream does the same per attribute
(:meth:`~faux_checks.gate.policy.Policy.attribute_policies`: its own auxiliary model, groups, counts
and rules), but reads the file **twice in all, not twice per attribute**:

1. **One sample pass** (:func:`sample_pass_attributes`) reads the features and every declared
   protected column; each attribute keeps its own bottom-k training sample over *its* audited rows
   (a row missing one attribute can still train another's model). The keys are those of
   :func:`~.sample.row_keys`, so each attribute's sample equals :func:`~.sample.sample_pass` run
   with that attribute's policy; a chunk's candidate rows are encoded once for every attribute.
2. **Setup**: :func:`~.plan.prepare_scoring` per attribute (one auxiliary model each).
3. **One score pass** (:func:`score_pass_attributes`): each chunk is read and encoded once and
   scored for every attribute (:func:`~.score.score_chunk`, the single-attribute pass's own step),
   each attribute writing its own scores file.

Why one pass rather than one per attribute: the file is read (and the features encoded) once,
whatever the number of attributes; memory grows only by one chunk's scores per attribute and one
training sample per attribute. Peak memory ≈ (attributes × ``max_train_rows`` × d float32) + one
chunk's encoded features + one attribute's gradients at a time.

An intersection (``sex×race``) is a derived multi-class attribute whose value on a row is its
cell label (``Female×Black``): each component's group label as
:func:`~faux_checks.inputs.protected.encode_protected` writes it (:func:`level_labels`), joined by
``×``; missing when any component is missing. Computed per chunk, never written to the data.

The outputs are named as in memory: with ``[[attributes]]`` one scores file per attribute beside
``out_path`` (``scores.parquet`` -> ``scores.sex.parquet``, ``scores.sex_x_race.parquet``;
:func:`attribute_paths`), rule rows prefixed ``attribute/rule`` when more than one attribute is
checked, and one :func:`~faux_checks.gate.decision.decide` over them (failed > undecided > passed;
:mod:`.outcome`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ...errors import InputError
from ...inputs.tabular import FeatureSpec
from ...method.auxiliary import AuxiliaryModel
from ..sections import attribute_key
from ..policy_schema import INTERSECTION_SEPARATOR, Policy
from .columns import StreamAttribute, level_labels
from .outcome import StreamAttributesResult, StreamSection, summarize_attributes
from .plan import ScoringPlan, prepare_scoring, resolve_feature_spec
from .sample import SamplePart, count_protected, row_keys
from .score import ScoresWriter, StreamCounts, score_chunk
from .source import DataSource, check_rows, encode_chunk, read_chunks

__all__ = ["StreamAttribute", "StreamAttributesResult", "StreamSection", "attribute_paths", "key_pass_attributes",
           "level_labels", "prepare_attributes", "sample_pass_attributes", "score_pass_attributes",
           "score_stream_attributes", "stream_attributes", "stream_columns", "summarize_attributes"]

_U64 = np.uint64


def stream_attributes(policy: Policy, columns: Sequence[str]) -> list[StreamAttribute]:
    """The policy's attributes in :attr:`~faux_checks.gate.policy.Policy.attribute_names` order.

    Raises
    ------
    InputError
        The data already holds a column with an intersection's derived name.
    """
    components = {INTERSECTION_SEPARATOR.join(c): tuple(c) for c in policy.intersections}
    for name, cross in components.items():
        if name in columns:
            raise InputError(f"the data already holds a column named '{name}', the name of the intersection "
                             f"{list(cross)}; rename that column")
    return [StreamAttribute(name, components.get(name, ()), one) for name, one in policy.attribute_policies().items()]


def stream_columns(spec: FeatureSpec, attributes: Sequence[StreamAttribute]) -> list[str]:
    """Columns a pass reads: the spec's source columns, then every declared protected column, once each."""
    declared = [c for a in attributes for c in (a.components or (a.name,))]
    return list(dict.fromkeys([*spec.source_columns, *declared]))


def _protected_columns(attributes: Sequence[StreamAttribute]) -> list[str]:
    return list(dict.fromkeys(c for a in attributes for c in (a.components or (a.name,))))


def attribute_paths(out_path: str | Path, names: Sequence[str], *, per_attribute: bool) -> dict[str, Path]:
    """Each attribute's scores file: ``out_path`` itself for ``protected = "..."``, else ``<stem>.<key><suffix>``.

    The names the in-memory ``check --scores-out`` uses (:func:`~faux_checks.gate.attributes.attribute_key`).

    Raises
    ------
    InputError
        A path exists already (nothing is overwritten).
    """
    base = Path(out_path)
    paths = ({n: base.with_name(f"{base.stem}.{attribute_key(n)}{base.suffix}") for n in names} if per_attribute
             else {names[0]: base})
    taken = [str(p) for p in paths.values() if p.exists()]
    if taken:
        raise InputError(f"{', '.join(taken)} exist already; choose another output path (nothing is overwritten)")
    return paths


def key_pass_attributes(source: DataSource, attributes: Sequence[StreamAttribute], *, chunk_rows: int,
                        row_groups: tuple[int, int] | None = None) -> dict[str, SamplePart]:
    """:func:`~.sample.key_pass` for every attribute in one read of the protected columns (sharded round 1).

    Returns
    -------
    dict
        Attribute name -> SamplePart (counts, levels, bottom-k keys; no features), in input order.
    """
    first = attributes[0].policy
    parts = {a.name: SamplePart(k=first.aux.max_train_rows) for a in attributes}
    for start, frame in read_chunks(source, _protected_columns(attributes), chunk_rows=chunk_rows,
                                    row_groups=row_groups):
        for a in attributes:
            missing = count_protected(parts[a.name], a.values(frame))
            kept = np.flatnonzero(~missing)
            parts[a.name]._add_rows(row_keys(start + kept, first.seed), (start + kept).astype(np.int64))
    return {name: p.sorted() for name, p in parts.items()}


def sample_pass_attributes(source: DataSource, attributes: Sequence[StreamAttribute], *, feature_spec: FeatureSpec,
                           chunk_rows: int, row_groups: tuple[int, int] | None = None,
                           max_keys: Mapping[str, int | None] | None = None) -> dict[str, SamplePart]:
    """One pass: per attribute, the counts and the bottom-k sample of its audited rows (module docstring).

    Each attribute's part equals :func:`~.sample.sample_pass` with its own policy (same keys, same
    rows, same encoded features); the rows any attribute may keep are encoded once per chunk.

    Parameters
    ----------
    max_keys : mapping, optional
        Attribute name -> the merged key parts' threshold (:func:`key_pass_attributes`); a shard
        keeps only its rows of each global sample.

    Returns
    -------
    dict
        Attribute name -> SamplePart, in input order.

    Raises
    ------
    InputError
        As :func:`~.sample.sample_pass`.
    """
    first = attributes[0].policy
    parts = {a.name: SamplePart(k=first.aux.max_train_rows) for a in attributes}
    for start, frame in read_chunks(source, stream_columns(feature_spec, attributes), chunk_rows=chunk_rows,
                                    row_groups=row_groups):
        n = len(frame)
        picks = {}
        for a in attributes:
            part, prot = parts[a.name], a.values(frame)
            missing = count_protected(part, prot)
            kept = np.flatnonzero(~missing)
            keys = row_keys(start + kept, first.seed)
            limit = (max_keys or {}).get(a.name)
            if limit is not None:
                cand = keys <= _U64(limit)
                kept, keys = kept[cand], keys[cand]
            if part.threshold is not None:
                cand = keys < _U64(part.threshold)
                kept, keys = kept[cand], keys[cand]
            if len(kept):
                picks[a.name] = (kept, keys, prot)
        if not picks:
            continue
        union = np.unique(np.concatenate([p[0] for p in picks.values()]))
        X = encode_chunk(feature_spec, frame if len(union) == n else frame.iloc[union], source, start, n)
        for name, (kept, keys, prot) in picks.items():
            values = prot.astype(object) if isinstance(prot.dtype, pd.CategoricalDtype) else prot
            parts[name]._add_rows(keys, (start + kept).astype(np.int64), X[np.searchsorted(union, kept)],
                                  values.to_numpy(dtype=object)[kept])
    return {name: p.sorted() for name, p in parts.items()}


def _prefixed(attribute: str, several: bool, exc: InputError) -> InputError:
    return InputError(f"protected attribute '{attribute}': {exc}") if several else exc


def prepare_attributes(target_model, samples: Mapping[str, SamplePart], attributes: Sequence[StreamAttribute], *,
                       feature_spec: FeatureSpec, chunk_rows: int, aux_models: Mapping[str, Any] | None = None,
                       progress: bool = False) -> dict[str, tuple[ScoringPlan, AuxiliaryModel]]:
    """:func:`~.plan.prepare_scoring` per attribute: its groups, output form and auxiliary model.

    Raises
    ------
    InputError
        As :func:`~.plan.prepare_scoring`, prefixed with the attribute when several are checked; an
        auxiliary model given for an attribute the policy does not check.
    """
    aux_models = dict(aux_models or {})
    unknown = sorted(set(aux_models) - {a.name for a in attributes})
    if unknown:
        raise InputError(f"auxiliary models given for {unknown}, which the policy does not check "
                         f"(attributes: {[a.name for a in attributes]})")
    several, out = len(attributes) > 1, {}
    for a in attributes:
        try:
            out[a.name] = prepare_scoring(target_model, samples[a.name], policy=a.policy, feature_spec=feature_spec,
                                          aux_model=aux_models.get(a.name), chunk_rows=chunk_rows, progress=progress)
        except InputError as exc:
            raise _prefixed(a.name, several, exc) from exc
    return out


def score_pass_attributes(target_model, auxes: Mapping[str, AuxiliaryModel], source: DataSource,
                          plans: Mapping[str, ScoringPlan], attributes: Sequence[StreamAttribute],
                          writers: Mapping[str, ScoresWriter], *, row_groups: tuple[int, int] | None = None,
                          progress: bool = False) -> dict[str, StreamCounts]:
    """One pass over ``source`` (or a shard's row groups): every chunk read and encoded once, scored per attribute.

    Each attribute's rows, scores and counts are those of :func:`~.score.score_pass` with its plan
    (the same :func:`~.score.score_chunk`); only the reading and encoding are shared.

    Returns
    -------
    dict
        Attribute name -> StreamCounts of the rows read.

    Raises
    ------
    InputError
        As :func:`~.score.score_pass`, prefixed with the attribute when several are checked.
    """
    testers = {a.name: plans[a.name].tester(target_model, auxes[a.name]) for a in attributes}
    counts = {a.name: StreamCounts.empty(plans[a.name].codec.groups) for a in attributes}
    first = plans[attributes[0].name]
    spec, several = first.feature_spec, len(attributes) > 1
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=source.n_rows, desc="fAux scores", unit="row", unit_scale=True, leave=False)
    for start, frame in read_chunks(source, stream_columns(spec, attributes), chunk_rows=first.chunk_rows,
                                    row_groups=row_groups):
        n = len(frame)
        values = {a.name: a.values(frame) for a in attributes}
        audited = np.flatnonzero(np.logical_or.reduce([v.notna().to_numpy() for v in values.values()]))
        encoded: list = []

        def rows_of(kept: np.ndarray, frame=frame, audited=audited, start=start, n=n, encoded=encoded) -> np.ndarray:
            if not encoded:     # the chunk's audited rows, encoded once for every attribute
                encoded.append(encode_chunk(spec, frame if len(audited) == n else frame.iloc[audited], source, start, n))
            return encoded[0][np.searchsorted(audited, kept)]

        for a in attributes:
            try:
                writers[a.name].write(*score_chunk(testers[a.name], plans[a.name], counts[a.name], frame,
                                                   values[a.name], start, source, rows_of))
            except InputError as exc:
                raise _prefixed(a.name, several, exc) from exc
            if counts[a.name].first_score_at is None:
                counts[a.name].first_score_at = time.time()
        if bar is not None:
            bar.update(n)
    if bar is not None:
        bar.close()
    return counts


def score_stream_attributes(
    target_model,
    source_path: str | Path,
    *,
    policy: Policy,
    out_path: str | Path,
    feature_spec: FeatureSpec | None = None,
    aux_models: Mapping[str, Any] | None = None,
    chunk_rows: int | None = None,
    progress: bool = False,
    model_info: dict | None = None,
    sep: str | None = None,
    thousands: str | None = None,
    decimal: str | None = None,
) -> StreamAttributesResult:
    """Score every row of a large Parquet/CSV file for every protected attribute of the policy, in this process.

    Parameters
    ----------
    target_model, source_path, feature_spec, chunk_rows, progress, model_info, sep, thousands, decimal
        As :func:`~.run.score_stream`. Without a feature spec the target receives the numeric
        columns less **every** declared protected column and the label.
    policy : Policy
        ``[[attributes]]`` (and ``intersections``), or ``protected = "..."`` (one attribute: the
        same scores, counts and decision as :func:`~.run.score_stream`).
    out_path : str or Path
        Base name of the scores files (:func:`attribute_paths`); each file as
        :func:`~.run.score_stream` writes it (``row``, ``lic_score``, ``flagged``, ``status``,
        ``group``), one row per input row. None is overwritten; all appear only when the run succeeds.
    aux_models : mapping, optional
        A given auxiliary model per attribute name; the others are trained on their own sample.

    Returns
    -------
    StreamAttributesResult

    Raises
    ------
    InputError
        As :func:`~.run.score_stream` (prefixed with the attribute when several are checked); an
        existing output path; an intersection's derived name already a column of the data.
    """
    from ...inputs.estimators import as_target

    t0, t_wall = time.perf_counter(), time.time()
    chunk_rows = int(chunk_rows or policy.scale.chunk_rows)
    paths = attribute_paths(out_path, policy.attribute_names, per_attribute=policy.reports_per_attribute)
    target_model, feature_spec = as_target(target_model, feature_spec)
    source = DataSource.open(source_path, sep=sep, thousands=thousands, decimal=decimal)
    spec = resolve_feature_spec(source, policy, feature_spec, chunk_rows=chunk_rows)
    check_rows(source, spec, chunk_rows=max(chunk_rows, 65_536))
    attributes = stream_attributes(policy, source.columns)
    samples = sample_pass_attributes(source, attributes, feature_spec=spec, chunk_rows=chunk_rows)
    t1 = time.perf_counter()
    prepared = prepare_attributes(target_model, samples, attributes, feature_spec=spec, chunk_rows=chunk_rows,
                                  aux_models=aux_models, progress=progress)
    del samples
    t2 = time.perf_counter()
    plans = {name: p for name, (p, _) in prepared.items()}
    writers: dict[str, ScoresWriter] = {}
    committed: list[Path] = []
    try:
        for a in attributes:
            writers[a.name] = ScoresWriter(paths[a.name])
        counts = score_pass_attributes(target_model, {n: aux for n, (_, aux) in prepared.items()}, source, plans,
                                       attributes, writers, progress=progress)
        for w in writers.values():
            committed.append(w.commit())
    except BaseException:
        for w in writers.values():
            w.abort()
        for done in committed:      # this run's own files: a failed run leaves none that looks complete
            done.unlink(missing_ok=True)
        raise
    t3 = time.perf_counter()
    first = min((c.first_score_at for c in counts.values() if c.first_score_at), default=None)
    timings = {"sample": t1 - t0, "aux": t2 - t1, "score": t3 - t2, "merge": 0.0, "total": t3 - t0,
               "first_score": (first - t_wall) if first else None}
    return summarize_attributes(counts, plans, attributes, source=source, out_paths=paths, timings=timings,
                                model_info={"workers": 0, **(model_info or {})})
