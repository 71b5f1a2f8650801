"""The score pass: every chunk encoded, scored, written in input order and counted exactly.

:class:`StreamCounts` keeps per-group running counts that merge in any order (shards);
:class:`ScoresWriter` appends one row per input row to the scores file, which appears under its
name only when the run succeeds.
"""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..._validation import fmt_count
from ...errors import InputError
from .plan import ScoringPlan
from .source import DataSource, encode_chunk

__all__ = ["SCORE_COLUMNS", "ScoresWriter", "StreamCounts", "merge_score_parts", "partial_path", "peak_rss_mb", "score_chunk",
           "check_chunk_outputs"]

SCORE_COLUMNS = ("row", "lic_score", "flagged", "status", "group")


@dataclass
class StreamCounts:
    """Running counts of the score pass; exact, and mergeable in any order (:meth:`merge`).

    Attributes
    ----------
    groups : tuple of str
    n, undefined : ndarray of shape (n_groups,), int64
        Audited rows and undefined scores, per group.
    flagged : ndarray of shape (n_groups,), float64
        Flagged defined rows per group: the sum of their flag probabilities (1 or 0 per row, or the
        probability of level configurations, :meth:`~faux_checks.method.result.LICResult.flag_probability`).
    score_sums : list of list of float
        Per group, the sum of the defined scores of each chunk; the mean uses ``math.fsum`` (exactly
        rounded, so it does not depend on the order chunks or shards are merged in).
    n_rows, n_missing_protected, n_chunks : int
    first_score_at : float or None
        ``time.time()`` when the first chunk's scores were written.
    max_score : float
        Largest defined score (NaN when none).
    """

    groups: tuple[str, ...]
    n: np.ndarray
    flagged: np.ndarray
    undefined: np.ndarray
    score_sums: list
    n_rows: int = 0
    n_missing_protected: int = 0
    n_chunks: int = 0
    first_score_at: float | None = None
    max_score: float = float("nan")

    @classmethod
    def empty(cls, groups: Sequence[str]) -> "StreamCounts":
        g = len(groups)
        return cls(tuple(groups), np.zeros(g, np.int64), np.zeros(g, np.float64), np.zeros(g, np.int64),
                   [[] for _ in range(g)])

    def add(self, group_index: np.ndarray, scores: np.ndarray, undefined: np.ndarray, flagged: np.ndarray) -> None:
        """Add one chunk's audited rows (all arrays of shape (m,))."""
        g = len(self.groups)
        self.n += np.bincount(group_index, minlength=g)
        self.flagged += np.bincount(group_index, weights=np.asarray(flagged, dtype=np.float64), minlength=g)
        self.undefined += np.bincount(group_index, weights=undefined, minlength=g).astype(np.int64)
        defined = ~undefined
        sums = np.bincount(group_index[defined], weights=scores[defined], minlength=g)
        counts = np.bincount(group_index[defined], minlength=g)
        for j in np.flatnonzero(counts):
            self.score_sums[j].append(float(sums[j]))
        if defined.any():
            top = float(scores[defined].max())
            self.max_score = top if not math.isfinite(self.max_score) else max(self.max_score, top)

    @classmethod
    def merge(cls, parts: Sequence["StreamCounts"]) -> "StreamCounts":
        """Counts over the union of the parts' rows (exact)."""
        if not parts:
            raise InputError("no counts to merge (no shards)")
        out = cls.empty(parts[0].groups)
        for p in parts:
            if p.groups != out.groups:
                raise InputError(f"shard counts disagree on the protected groups: {p.groups} vs {out.groups}")
            out.n += p.n
            out.flagged += p.flagged
            out.undefined += p.undefined
            for j in range(len(out.groups)):
                out.score_sums[j].extend(p.score_sums[j])
            out.n_rows += p.n_rows
            out.n_missing_protected += p.n_missing_protected
            out.n_chunks += p.n_chunks
            if p.first_score_at is not None:
                out.first_score_at = min(out.first_score_at or p.first_score_at, p.first_score_at)
            if math.isfinite(p.max_score):
                out.max_score = p.max_score if not math.isfinite(out.max_score) else max(out.max_score, p.max_score)
        return out

    @property
    def n_individuals(self) -> int:
        return int(self.n.sum())

    @property
    def n_flagged(self) -> int:
        return int(round(float(self.flagged.sum())))

    @property
    def n_undefined(self) -> int:
        return int(self.undefined.sum())

    def by_group(self) -> pd.DataFrame:
        """Per group: ``n``, ``flagged``, ``flagged_fraction`` (undefined counted as flagged, over the group's rows),
        ``flagged_fraction_defined`` (over its defined scores), ``undefined``, ``mean_score``."""
        defined = self.n - self.undefined
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(self.n > 0, (self.flagged + self.undefined) / np.maximum(self.n, 1), np.nan)
            frac_defined = np.where(defined > 0, self.flagged / np.maximum(defined, 1), np.nan)
        mean = [math.fsum(s) / d if d else float("nan") for s, d in zip(self.score_sums, defined, strict=False)]
        out = pd.DataFrame({"n": self.n, "flagged": self.flagged, "flagged_fraction": frac,
                            "flagged_fraction_defined": frac_defined, "undefined": self.undefined, "mean_score": mean},
                           index=pd.Index(self.groups, name="group"))
        return out[out["n"] > 0]


def partial_path(path: Path) -> Path:
    """``<path>.partial``, the name an output is written under until it is whole; checked free, with ``path``.

    Raises
    ------
    InputError
        ``path`` exists (nothing is overwritten), or ``<path>.partial`` does (another run writing it, or a crashed one).
    """
    if path.exists():
        raise InputError(f"{path} exists already; choose another output path (nothing is overwritten)")
    partial = path.with_name(path.name + ".partial")
    if partial.exists():
        raise InputError(f"{partial} exists (another run writing it?); remove it or choose another path")
    return partial


class ScoresWriter:
    """Appends score rows to ``path`` (Parquet by suffix ``.parquet``, else CSV) via a ``.partial`` file.

    The file appears under its name only on :meth:`commit`; :meth:`abort` removes the partial
    file, so a failed run never leaves a file that looks complete. Never overwrites.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.partial = partial_path(self.path)
        self.format = "parquet" if self.path.suffix == ".parquet" else "csv"
        self._writer: Any = None                   # pyarrow.parquet.ParquetWriter once the first table comes
        self._header = True

    def write(self, rows, scores, flagged, status, group) -> None:
        """One chunk: arrays of shape (m,); ``flagged``/``group`` are ignored where status != 'scored'/audited."""
        scored = status == "scored"
        if self.format == "parquet":
            self.write_table(_score_table(rows, scores, flagged, status, group))
            return
        frame = pd.DataFrame({"row": rows, "lic_score": scores,
                              "flagged": pd.array(np.where(scored, flagged, False), dtype="boolean"),
                              "status": status, "group": group})
        frame.loc[~scored, "flagged"] = pd.NA
        frame.to_csv(self.partial, mode="a", header=self._header, index=False)
        self._header = False

    def write_table(self, table) -> None:
        """Append an Arrow table with the score columns."""
        if self.format == "csv":
            frame = table.to_pandas()
            frame["flagged"] = frame["flagged"].astype("boolean")
            frame.to_csv(self.partial, mode="a", header=self._header, index=False)
            self._header = False
            return
        import pyarrow.parquet as pq

        if self._writer is None:
            self._writer = pq.ParquetWriter(str(self.partial), table.schema)
        self._writer.write_table(table, row_group_size=max(len(table), 1))

    def commit(self) -> Path:
        if self._writer is not None:
            self._writer.close()
        elif self.format == "parquet":  # no rows: still a valid (empty) file
            import pyarrow.parquet as pq

            pq.write_table(_score_table(*[np.empty(0)] * 5), str(self.partial))
        if not self.partial.exists():
            self.partial.write_text(",".join(SCORE_COLUMNS) + "\n")
        self.partial.replace(self.path)
        return self.path

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - best effort on the way out  # pragma: no cover
                pass
        self.partial.unlink(missing_ok=True)


def _score_table(rows, scores, flagged, status, group):
    import pyarrow as pa

    status = np.asarray(status, dtype=object)
    scored = status == "scored"
    audited = status != "not_audited"
    return pa.Table.from_arrays(
        [pa.array(np.asarray(rows, dtype=np.int64)), pa.array(np.asarray(scores, dtype=np.float64)),
         pa.array(np.asarray(flagged, dtype=bool), mask=~scored), pa.array(status, type=pa.string()),
         pa.array(np.asarray(group, dtype=object), type=pa.string(), mask=~audited)],
        names=list(SCORE_COLUMNS))


def score_chunk(tester, plan: ScoringPlan, counts: StreamCounts, frame: pd.DataFrame, prot: pd.Series, start: int,
                source: DataSource, encoded=None) -> tuple[np.ndarray, ...]:
    """Score one chunk for one protected attribute: add it to ``counts`` and return its score rows.

    Parameters
    ----------
    tester : FAuxTester
        :meth:`ScoringPlan.tester`.
    plan : ScoringPlan
    counts : StreamCounts
        Updated in place: the chunk's audited rows, missing protected values and one chunk.
    frame : DataFrame of shape (n, any)
        The chunk (the spec's source columns at least).
    prot : Series of shape (n,)
        The attribute's raw values on the chunk (a declared column, or an intersection's cell labels).
    start : int
        Input-row number of the chunk's first row.
    source : DataSource
        For the error messages.
    encoded : callable, optional
        ``encoded(kept)`` -> the encoded features (m, d) of the chunk's rows ``kept`` (a caller that
        scores several attributes encodes each chunk once); default :func:`~.source.encode_chunk`.

    Returns
    -------
    rows, scores, flagged, status, group : ndarrays of shape (n,)
        The arguments of :meth:`ScoresWriter.write`.

    Raises
    ------
    InputError
        A missing protected value with ``missing_protected = "error"`` (the chunk's rows named), an
        unencodable feature value, probability outputs that are not probabilities on a row of the chunk
        (:func:`check_chunk_outputs`: the first such row's input-row number), and FAuxTester's own input errors.
    """
    codec, delta = plan.codec, plan.policy.faux.delta
    n = len(frame)
    missing = prot.isna().to_numpy()
    if missing.any() and plan.policy.missing_protected == "error":
        raise InputError(f"protected attribute '{codec.name}' has {fmt_count(missing.sum())} missing values in rows "
                         f"{fmt_count(start)}-{fmt_count(start + n - 1)}; drop or impute them, or set missing_protected = \"drop\"")
    kept = np.flatnonzero(~missing)
    scores = np.full(n, np.nan)
    flagged: np.ndarray = np.zeros(n, dtype=bool)
    status: np.ndarray = np.full(n, "not_audited", dtype=object)
    group: np.ndarray = np.full(n, None, dtype=object)
    if len(kept):
        X = (encode_chunk(plan.feature_spec, frame if len(kept) == n else frame.iloc[kept], source, start, n)
             if encoded is None else encoded(kept))
        c = codec.encode(prot if len(kept) == n else prot.iloc[kept])
        idx = codec.group_index(c)
        check_chunk_outputs(tester.target_model, X, plan, start + kept)
        lic = tester.evaluate(X, c, evidence=False)
        hit = lic.flagged(delta)
        counts.add(idx, lic.scores, lic.undefined, lic.flag_probability(delta))
        scores[kept] = lic.scores
        flagged[kept] = hit
        status[kept] = np.where(lic.undefined, "undefined", "scored")
        group[kept] = np.asarray(codec.groups, dtype=object)[idx]
    counts.n_rows += n
    counts.n_missing_protected += int(missing.sum())
    counts.n_chunks += 1
    return np.arange(start, start + n, dtype=np.int64), scores, flagged, status, group


def check_chunk_outputs(target_model, X, plan: ScoringPlan, rows: np.ndarray) -> None:
    """Refuse a chunk whose probability outputs are not probabilities (as ``check`` does on every audited row).

    :func:`~.plan.prepare_scoring` checks the sample only; this reads each chunk's audited rows too (one
    forward pass without gradients, :func:`faux_checks.gate.rows.check_model_outputs`), so a softmax that
    does not sum to 1 or a probability outside [0, 1] on any row refuses the run. Other forms are not read.

    Parameters
    ----------
    target_model : torch module or forward-only target
    X : ndarray or Tensor of shape (m, d)
        The chunk's encoded audited rows.
    plan : ScoringPlan
        Its ``output`` is the form resolved on the sample.
    rows : ndarray of shape (m,)
        Input-row numbers (0-based, of the whole file) of ``X``'s rows, for the message.

    Raises
    ------
    InputError
        From :func:`~faux_checks.gate.rows.check_model_outputs`: the count of bad rows in the chunk and
        the first one's input-row number and outputs, with the fix.
    """
    if plan.output.form not in ("softmax", "probability"):
        return
    import torch

    from ..rows import check_model_outputs

    Xt = X if isinstance(X, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(X))
    rows = np.asarray(rows)
    check_model_outputs(target_model, Xt, plan.output, rows=rows,
                        scope=f"audited rows of the chunk of input rows {fmt_count(rows.min())}-{fmt_count(rows.max())}",
                        outcome="No scores file was written")


def merge_score_parts(part_paths: Sequence[str | Path], out_path: str | Path) -> Path:
    """Concatenate shard part files (Parquet, in shard order) into one scores file, row group by row group."""
    import pyarrow.parquet as pq

    writer = ScoresWriter(out_path)
    try:
        for part in part_paths:
            pf = pq.ParquetFile(str(part))
            for rg in range(pf.metadata.num_row_groups):
                writer.write_table(pf.read_row_group(rg))
        return writer.commit()
    except BaseException:
        writer.abort()
        raise


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB (``ru_maxrss``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
