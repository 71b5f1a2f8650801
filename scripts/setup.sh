#!/usr/bin/env bash
# Creates .venv (if absent) and installs faux-checks with everything the gate, the audit and the
# tests need. torch is pinned to the CPU wheel first: a bare `torch` requirement would pull a
# multi-GB CUDA build (docs/stack.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[gate,audit,baselines,blackbox,test,docs]"
.venv/bin/python -m pip check
