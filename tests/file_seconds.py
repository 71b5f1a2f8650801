"""Per-file seconds of one run of the suite, for the order in which pytest-xdist hands out files (tests/conftest.py).

``python tests/file_seconds.py [--scale F] LOG [LOG ...] > TABLE``, then ``mv TABLE tests/file_seconds.json``, reads
the ``--durations=0`` lines of pytest's output (``12.34s call     tests/x/test_y.py::test_z``) and writes, per file, the seconds of its tests
marked ``slow`` and of its other tests (setup, call and teardown summed; the mean where several logs are given;
null for a kind the logs do not hold).
The slow tests are those of ``pytest --collect-only -q -m slow``, run here. ``--scale F`` multiplies every figure by
``F`` (a log of a loaded machine brought to the quiet machine's seconds, which :data:`conftest.UNMEASURED_S` uses).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+(tests/\S+?::\S.*)$", re.M)


def slow_ids(root: Path) -> set[str]:
    """Node ids of the tests marked ``slow`` (``pytest --collect-only``)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", "-m", "slow"],
                         cwd=root, capture_output=True, text=True, check=True).stdout
    return {line.strip() for line in out.splitlines() if "::" in line}


def file_seconds(logs: list[str], slow: set[str]) -> dict[str, list[float | None]]:
    """``{file: [seconds of its slow tests, seconds of its other tests]}``, the mean over ``logs``; None where the
    logs hold none of that kind (a ``-m "not slow"`` run: no slow test)."""
    total: dict[str, list[float | None]] = defaultdict(lambda: [None, None])
    for text in logs:
        for seconds, node in LINE.findall(text):
            kind = node.strip() not in slow
            entry = total[node.split("::", 1)[0]]
            entry[kind] = (entry[kind] or 0.0) + float(seconds) / len(logs)
    return {path: [None if t is None else round(t, 1) for t in pair] for path, pair in sorted(total.items())}


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    args = sys.argv[1:]
    scale = float(args[1]) if args[:1] == ["--scale"] else 1.0
    texts = [Path(p).read_text() for p in (args[2:] if args[:1] == ["--scale"] else args)]
    table = file_seconds(texts, slow_ids(root))
    json.dump({path: [None if t is None else round(t * scale, 1) for t in pair] for path, pair in table.items()},
              sys.stdout, indent=0)
    sys.stdout.write("\n")
