"""The sharded run's scores: a partitioned Parquet dataset, one part file per shard, written by the workers.

No serial pass over the output follows the last shard: a ``.parquet`` output is a folder, ``<out>/part-00000.parquet, part-00001.parquet, ...`` (one per shard, in
shard order, so in input order when read sorted by name), written straight by the score tasks; nothing is
copied at the end. It reads as one table with ``pyarrow.dataset.dataset(out)``, ``pandas.read_parquet(out)``,
DuckDB or Spark, and with :func:`read_scores`. Files are written under ``<out>.partial/`` and the folder is
renamed to ``<out>`` only when every shard succeeded (:meth:`ScoresDataset.commit`); a failed run leaves no
folder that looks complete, and nothing is overwritten.

A CSV output stays one file (CSV has no dataset form here): the parts are concatenated as before
(:func:`~.score.merge_score_parts`), a serial tail the run's ``timings["merge"]`` shows.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ...errors import InputError
from .score import partial_path

__all__ = ["ScoresDataset", "is_dataset_output", "read_scores", "score_files"]


def is_dataset_output(path: str | Path) -> bool:
    """True when the sharded run writes ``path`` as a partitioned Parquet dataset (a ``.parquet`` name)."""
    return Path(path).suffix == ".parquet"


class ScoresDataset:
    """A new dataset folder ``path``, written part by part under ``<path>.partial`` and renamed on :meth:`commit`.

    Parameters
    ----------
    path : str or Path
        The dataset folder to create (it must not exist; nothing is overwritten).

    Raises
    ------
    InputError
        ``path`` exists, or ``<path>.partial`` does (another run writing it, or a crashed one: remove it).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.partial = partial_path(self.path)
        self.partial.mkdir(parents=False)

    def part_path(self, i: int) -> str:
        """The part file of shard ``i`` (0-based; names sort in shard order)."""
        return str(self.partial / f"part-{int(i):05d}.parquet")

    def commit(self, n_parts: int) -> Path:
        """Rename the folder to its name once all ``n_parts`` part files are there; return the path.

        Raises
        ------
        InputError
            A part file is missing (a shard did not finish); the partial folder is kept for inspection.
        """
        missing = [p for p in (self.part_path(i) for i in range(n_parts)) if not Path(p).exists()]
        if missing:
            raise InputError(f"{len(missing)} of {n_parts} shard part files are missing in {self.partial} "
                             f"(first: {Path(missing[0]).name}); the run did not finish, nothing was written to {self.path}")
        self.partial.replace(self.path)
        return self.path

    def abort(self) -> None:
        """Remove the partial folder (a failed run)."""
        shutil.rmtree(self.partial, ignore_errors=True)


def score_files(path: str | Path) -> list[Path]:
    """The Parquet files of a scores output, in input order: the file itself, or a dataset folder's parts by name."""
    path = Path(path)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix == ".parquet" and not p.name.startswith((".", "_")))
    return [path]


def read_scores(path: str | Path, columns: list[str] | None = None):
    """A scores output (one file or a dataset folder) as one ``pyarrow.Table`` in input order.

    For outputs larger than memory, iterate ``pyarrow.dataset.dataset(score_files(path)).to_batches()`` instead.
    """
    import pyarrow.dataset as ds

    return ds.dataset([str(p) for p in score_files(path)], format="parquet").to_table(columns=columns)
