"""The passes of a streamed check over N ≥ 1 protected attributes: one sample pass, one score pass, one decision.

The in-memory gate (:mod:`faux_checks.gate.attributes`) runs one check per attribute and
intersection and decides once (:func:`faux_checks.gate.sections.combine`). The stream does the same
per attribute (:meth:`~faux_checks.gate.policy.Policy.attribute_policies`: its own auxiliary model,
groups, counts and rules), but reads the file **twice in all, not twice per attribute**:

1. **One sample pass** (:func:`sample_pass`) reads the features and every declared protected
   column; each attribute keeps its own bottom-k training sample over *its* audited rows (a row
   missing one attribute can still train another's model). The keys are those of
   :func:`~.sample.row_keys`; a chunk's candidate rows are encoded once for every attribute.
   :func:`key_pass` is its first round in the sharded flow (keys only, no features).
2. **Setup**: :func:`~.plan.prepare_scoring` per attribute (:func:`prepare_attributes`, one
   auxiliary model each).
3. **One score pass** (:func:`score_pass`): each chunk is read and encoded once and scored for
   every attribute (:func:`~.score.score_chunk`), each attribute writing its own scores file.

The file is read (and the features encoded) once, whatever the number of attributes; memory grows
only by one chunk's scores per attribute and one training sample per attribute. Peak memory ≈
(attributes × ``max_train_rows`` × d float32) + one chunk's encoded features + one attribute's
gradients at a time.

An intersection (``sex×race``) is a derived multi-class attribute whose value on a row is its
cell label (``Female×Black``): each component's group label as
:func:`~faux_checks.inputs.protected.encode_protected` writes it (:func:`~.columns.level_labels`),
joined by ``×``; missing when any component is missing. Computed per chunk, never written to the data.

The outputs are named as in memory: a ``protected = "..."`` policy writes ``out_path`` itself;
``[[attributes]]`` one scores file per attribute beside it (``scores.parquet`` ->
``scores.sex.parquet``, ``scores.sex_x_race.parquet``; :func:`faux_checks.gate.sections.attribute_paths`).
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ...errors import InputError
from ...inputs.tabular import FeatureSpec
from ...method.auxiliary import AuxiliaryModel
from ..policy_schema import INTERSECTION_SEPARATOR, Policy
from .columns import StreamAttribute
from .plan import ScoringPlan, prepare_scoring
from .prefetch import prefetch_fit_imports, wait_fit_imports
from .sample import SamplePart, count_protected, row_keys
from .score import ScoresWriter, StreamCounts, score_chunk
from .source import DataSource, encode_chunk, read_chunks

__all__ = ["key_pass", "prepare_attributes", "sample_pass", "score_pass", "stream_attributes",
           "stream_columns"]

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


def key_pass(source: DataSource, attributes: Sequence[StreamAttribute], *, chunk_rows: int,
             row_groups: tuple[int, int] | None = None) -> dict[str, SamplePart]:
    """The protected columns only: per attribute, counts, levels and the bottom-k keys of its audited rows.

    Round 1 of the sharded sample (``flows/shard.py``), every protected column read once: the merged
    key parts' largest kept key (:attr:`~.sample.SamplePart.threshold`) given to :func:`sample_pass`
    as ``max_keys`` makes each shard return exactly its rows of each global sample, so k rows per
    attribute cross the network in all, not k per shard.

    Returns
    -------
    dict
        Attribute name -> SamplePart (counts, levels, bottom-k keys; no features), in input order.
    """
    prefetch_fit_imports()                                 # the fit after this pass imports them; loaded meanwhile
    first = attributes[0].policy
    parts = {a.name: SamplePart(k=first.aux.max_train_rows) for a in attributes}
    for start, frame in read_chunks(source, _protected_columns(attributes), chunk_rows=chunk_rows,
                                    row_groups=row_groups):
        for a in attributes:
            missing = count_protected(parts[a.name], a.values(frame))
            kept = np.flatnonzero(~missing)
            parts[a.name]._add_rows(row_keys(start + kept, first.seed), (start + kept).astype(np.int64))
    return {name: p.sorted() for name, p in parts.items()}


def sample_pass(source: DataSource, attributes: Sequence[StreamAttribute], *, feature_spec: FeatureSpec,
                chunk_rows: int, row_groups: tuple[int, int] | None = None,
                max_keys: Mapping[str, int | None] | None = None) -> dict[str, SamplePart]:
    """One pass over ``source`` (or the row groups of a shard): per attribute, its counts and bottom-k sample.

    Only each sample's candidate rows (key below its current k-th smallest) are encoded, once per
    chunk for every attribute. Candidates are buffered and compacted to the bottom-k every k/2 rows
    (O(candidates) copying, at most 1.5 k rows held per attribute).

    Parameters
    ----------
    max_keys : mapping, optional
        Attribute name -> the merged key parts' threshold (:func:`key_pass`); a shard keeps only
        its rows of each global sample.

    Returns
    -------
    dict
        Attribute name -> SamplePart, in input order (:meth:`~.sample.SamplePart.sorted`).

    Raises
    ------
    InputError
        Missing columns, or a feature value the spec cannot encode in a sampled row (the message
        names the rows of the chunk).
    """
    prefetch_fit_imports()                                 # the fit after this pass imports them; loaded meanwhile
    first = attributes[0].policy
    parts = {a.name: SamplePart(k=first.aux.max_train_rows) for a in attributes}
    pending: dict[str, list[tuple]] = {a.name: [] for a in attributes}
    thresholds: dict[str, int | None] = {a.name: None for a in attributes}
    for start, frame in read_chunks(source, stream_columns(feature_spec, attributes), chunk_rows=chunk_rows,
                                    row_groups=row_groups):
        n = len(frame)
        picks = {}
        for a in attributes:
            prot = a.values(frame)
            kept = np.flatnonzero(~count_protected(parts[a.name], prot))
            keys = row_keys(start + kept, first.seed)
            for limit, strict in (((max_keys or {}).get(a.name), False), (thresholds[a.name], True)):
                if limit is not None:
                    cand = keys < _U64(limit) if strict else keys <= _U64(limit)
                    kept, keys = kept[cand], keys[cand]
            if len(kept):
                picks[a.name] = (kept, keys, prot)
        if not picks:
            continue
        union = np.unique(np.concatenate([p[0] for p in picks.values()]))
        X = encode_chunk(feature_spec, frame if len(union) == n else frame.iloc[union], source, start, n)
        for name, (kept, keys, prot) in picks.items():
            values = prot.astype(object) if isinstance(prot.dtype, pd.CategoricalDtype) else prot
            pending[name].append((keys, (start + kept).astype(np.int64), X[np.searchsorted(union, kept)],
                                  values.to_numpy(dtype=object)[kept]))
            if sum(len(b[0]) for b in pending[name]) >= max(parts[name].k // 2, 1):
                parts[name]._add_rows(*(np.concatenate(c) for c in zip(*pending[name], strict=True)))
                pending[name], thresholds[name] = [], parts[name].threshold
    for name, buffered in pending.items():
        if buffered:
            parts[name]._add_rows(*(np.concatenate(c) for c in zip(*buffered, strict=True)))
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
    wait_fit_imports()                                     # the sample pass's prefetch ends before the fit imports
    several, out = len(attributes) > 1, {}
    for a in attributes:
        try:
            out[a.name] = prepare_scoring(target_model, samples[a.name], policy=a.policy, feature_spec=feature_spec,
                                          aux_model=aux_models.get(a.name), chunk_rows=chunk_rows, progress=progress)
        except InputError as exc:
            raise _prefixed(a.name, several, exc) from exc
    return out


def score_pass(target_model, auxes: Mapping[str, AuxiliaryModel], source: DataSource,
                          plans: Mapping[str, ScoringPlan], attributes: Sequence[StreamAttribute],
                          writers: Mapping[str, ScoresWriter], *, row_groups: tuple[int, int] | None = None,
                          progress: bool = False) -> dict[str, StreamCounts]:
    """One pass over ``source`` (or a shard's row groups): every chunk read and encoded once, scored per attribute.

    Each attribute's rows, scores and counts come from :func:`~.score.score_chunk` with its plan;
    the reading and encoding are shared.

    Returns
    -------
    dict
        Attribute name -> StreamCounts of the rows read.

    Raises
    ------
    InputError
        A feature value the spec cannot encode (names the chunk's rows), a missing protected value
        with ``missing_protected = "error"``, and FAuxTester's own input errors; prefixed with the
        attribute when several are checked.
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
