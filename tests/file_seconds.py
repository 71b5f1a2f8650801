"""Per-file seconds of one run of the suite, for the order in which pytest-xdist hands out files (tests/conftest.py).

``python tests/file_seconds.py LOG [LOG ...] > tests/file_seconds.json`` reads the ``--durations=0`` lines of
pytest's output (``12.34s call     tests/x/test_y.py::test_z``) and writes, per file, the seconds of its tests
marked ``slow`` and of its other tests (setup, call and teardown summed; the mean where several logs are given).
The slow tests are those of ``pytest --collect-only -q -m slow``, run here.
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


def file_seconds(logs: list[str], slow: set[str]) -> dict[str, list[float]]:
    """``{file: [seconds of its slow tests, seconds of its other tests]}``, the mean over ``logs``."""
    total: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for text in logs:
        for seconds, node in LINE.findall(text):
            total[node.split("::", 1)[0]][node.strip() not in slow] += float(seconds) / len(logs)
    return {path: [round(s, 1), round(o, 1)] for path, (s, o) in sorted(total.items())}


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    texts = [Path(p).read_text() for p in sys.argv[1:]]
    json.dump(file_seconds(texts, slow_ids(root)), sys.stdout, indent=0)
    sys.stdout.write("\n")
