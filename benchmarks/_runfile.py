"""The JSON-lines run files of the ground-truth benchmarks: one run per line, appended as each run ends, and read
back to print a benchmark's table (``--out`` / ``--table``), with the bundled data folder (``--data-dir``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

#: The bundled data sets beside the repository (provenance and licences in that folder).
DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def add_run_file_arguments(ap: argparse.ArgumentParser, *, data_dir: bool = True) -> None:
    """``--out`` (the run file appended to), ``--table`` (print a run file's table and exit) and ``--data-dir``."""
    ap.add_argument("--out", type=Path, default=None, help="JSON file the rows are appended to (one run per line)")
    ap.add_argument("--table", type=Path, default=None, help="print the markdown table of a JSON file and exit")
    if data_dir:
        ap.add_argument("--data-dir", type=Path, default=DATA_DIR)


def bundled_sources(data_dir: Path):
    """The bundled real rows of ``data_dir`` (``_cells.Sources``) with torch on one thread: each run's figures are
    those of one process, whatever the machine's cores."""
    import torch
    from _cells import Sources

    torch.set_num_threads(1)
    return Sources(data_dir)


def read_runs(path: Path) -> list[dict]:
    """Every run of a run file, in the order written."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def append_run(path: Path | None, row: dict) -> None:
    """Append one run to ``path`` (nothing when None): a run killed later leaves the earlier ones."""
    if path is not None:
        with open(path, "a") as fh:
            fh.write(json.dumps(row) + "\n")
