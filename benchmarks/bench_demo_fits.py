"""How often the demo trains an auxiliary model and fits a swap reference.

Runs ``faux-checks demo`` in this process (fresh temporary home, registry and Prefect folder), counting
every ``AuxiliaryModel.fit`` call (one per trained seed) and every ``fit_swap_reference`` call, and reads
:func:`faux_checks.gate.aux_cache.aux_cache_stats` at the end: ``trainings`` (models trained), ``hits``
(trainings the cache saved: same encoded rows, protected values, groups, kind, [aux] settings and seed).
Without the cache a run trains ``trainings + hits`` models, which is the "before" figure: the same run, one
process, so before and after are one measurement.

    python benchmarks/bench_demo_fits.py [--json FILE]

The last line printed is ``aux_fits=<n> aux_fits_without_cache=<m> swap_reference_fits=<k>``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _environment(tmp: Path) -> None:
    os.environ.update(DO_NOT_TRACK="true", MLFLOW_DISABLE_TELEMETRY="true", PREFECT_SERVER_ANALYTICS_ENABLED="false",
                      FAUX_CHECKS_HOME=str(tmp / "home"), PREFECT_HOME=str(tmp / "prefect"),
                      MLFLOW_TRACKING_URI=f"sqlite:///{tmp}/mlflow.db")


def _import_all() -> None:
    """Import every module of the library and the flows, so that each one's name binding can be counted."""
    for package in ("faux_checks", "faux_checks_flows", "faux_checks_gx"):
        pkg = importlib.import_module(package)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}."):
            if info.name.endswith("_probe_child"):
                continue
            try:
                importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 - an optional backend missing: nothing of it to count
                pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the counts to this JSON file")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-demo-fits-"))
    _environment(tmp)
    _import_all()

    from faux_checks.gate.aux_cache import aux_cache_stats, clear_aux_cache
    from faux_checks.method import swap
    from faux_checks.method.auxiliary import AuxiliaryModel

    counts = {"aux_fit": 0, "swap_reference": 0}
    fit = AuxiliaryModel.fit

    def counted_fit(self, *a, **k):
        counts["aux_fit"] += 1
        return fit(self, *a, **k)

    original = swap.fit_swap_reference

    def counted_reference(*a, **k):
        counts["swap_reference"] += 1
        return original(*a, **k)

    AuxiliaryModel.fit = counted_fit
    for module in list(sys.modules.values()):   # every binding of the name, wherever it was imported
        if getattr(module, "fit_swap_reference", None) is original:
            module.fit_swap_reference = counted_reference
    clear_aux_cache()
    from faux_checks_app.cli import main as cli

    t0 = time.perf_counter()
    code = cli(["demo", "--workdir", str(tmp / "demo")])
    wall = time.perf_counter() - t0
    stats = aux_cache_stats()
    out = {"exit_code": code, "wall_s": round(wall, 1), "aux_fit_calls": counts["aux_fit"],
           "swap_reference_fits": counts["swap_reference"], **{f"cache_{k}": v for k, v in stats.items()},
           "aux_fits_without_cache": stats["trainings"] + stats["hits"]}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print(f"aux_fits={out['aux_fit_calls']} aux_fits_without_cache={out['aux_fits_without_cache']} "
          f"swap_reference_fits={out['swap_reference_fits']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
