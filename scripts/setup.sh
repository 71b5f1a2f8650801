#!/usr/bin/env bash
# Creates .venv (if absent) and installs faux-checks with everything the gate, the audit and the
# tests need. torch is pinned to the CPU wheel first: a bare `torch` requirement would pull a
# multi-GB CUDA build (docs/stack.md).
# A second run with the same pyproject.toml, this script and the same Python is a no-op: the install
# writes .venv/.faux-checks-setup (a SHA-256 of those) last, and a run that finds it unchanged and
# `pip check` clean stops there. The editable install reads the sources in place, so code edits need no
# new install; any change to the requirements changes the stamp.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
STAMP=.venv/.faux-checks-setup
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
want=$({ cat pyproject.toml scripts/setup.sh; .venv/bin/python -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && .venv/bin/python -m pip check >/dev/null 2>&1; then
  exit 0
fi
rm -f "$STAMP"
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[gate,audit,baselines,blackbox,test,docs]"
.venv/bin/python -m pip check
echo "$want" > "$STAMP"
