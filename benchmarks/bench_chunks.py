"""A clean stream passes whatever the chunk size: the batch-independence probe on 1 M Adult-like rows.

``score-large`` must not reject clean Adult rows (1.5 M with the default 16,384-row chunks) as
"batch-dependent": a probe comparing the auxiliary model's float32 outputs per chunk with
``atol = 1e-6`` would reject them, since float32 kernels round differently for a batch of 8 rows and a batch
of one. The probe runs once per model per stream, in float64, with a tolerance relative to the
output (``faux_checks.method.gradients.check_batch_independence``).

    python benchmarks/bench_chunks.py                          # n = 1,000,000, chunks 4093,15060,16384,65536,100003
    python benchmarks/bench_chunks.py --n 200000 --chunks 4093,16384 --json out.json

What it does:

- **Data**: UCI Adult without missing values (48,842 rows, bundled), resampled with replacement to
  ``--n`` rows (seed 0), written to a temporary Parquet file in row groups of 262,144 rows (larger
  than every chunk size, so the chunk size alone sets the chunks).
- **Models**: the demo's v1 target (``TargetMLP`` trained on Adult's training split over
  ``ADULT_FEATURES``, 5 epochs, seed 0; one logit); the auxiliary model trained by the tool on
  the stream's bottom-k sample (policy ``adult.toml``), i.e. the models of the failing report.
- **Per chunk size**: ``score_stream`` end to end (decision, flagged count, the probe's measured
  differences, wall seconds). Every chunk size must give the same decision and flagged count.
- **Float32 probe, for comparison** (``old_probe_rejected_chunks``): a per-chunk check in float32
  (``allclose(rtol=1e-4, atol=1e-6)`` on each chunk's first 8 rows) applied to the target and the tool's
  auxiliary model on every chunk; the number of chunks it would reject is reported (run per chunk, one
  rejection would stop the stream).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def old_probe_fails(fn, x) -> bool:
    """A float32 probe with an absolute tolerance (atol 1e-6), the naive design, on at most 8 rows."""
    import torch

    x = x[:8].float()
    if len(x) < 2:
        return False
    with torch.no_grad():
        batch = fn(x).reshape(len(x), -1).double()
        single = torch.cat([fn(x[i:i + 1]).reshape(1, -1).double() for i in range(len(x))])
    return not torch.allclose(batch, single, rtol=1e-4, atol=1e-6)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--chunks", default="4093,15060,16384,65536,100003")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    chunk_sizes = [int(c) for c in args.chunks.split(",")]

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    from faux_checks import FeatureSpec
    from faux_checks.gate.policy import load_policy
    from faux_checks.gate.stream.plan import prepare_scoring
    from faux_checks.gate.stream.run import score_stream
    from faux_checks.gate.stream.passes import sample_pass, stream_attributes
    from faux_checks.gate.stream.source import DataSource, encode_chunk
    from faux_checks.inputs.datasets import ADULT_FEATURES, load_adult
    from faux_checks_app.demo import train_target

    policy = load_policy(ROOT / "faux_checks/gate/policies/adult.toml")
    adult = load_adult()
    train = load_adult(split="train")
    spec = FeatureSpec.fit(train, ADULT_FEATURES, name="adult-bench")
    t0 = time.perf_counter()
    target = train_target(spec.encode(train), train["income"].astype(int).to_numpy(), epochs=5, seed=0)
    train_s = time.perf_counter() - t0
    results = {"n": args.n, "chunks": chunk_sizes, "target_train_s": round(train_s, 1), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "adult-1m.parquet"
        rng = np.random.default_rng(0)
        idx = rng.integers(0, len(adult), size=args.n)
        table = pa.Table.from_pandas(adult.iloc[idx].reset_index(drop=True).drop(columns=["split"], errors="ignore"),
                                     preserve_index=False)
        pq.write_table(table, str(path), row_group_size=262_144)
        source = DataSource.open(path)

        # the tool's own aux model on this file (the same bottom-k sample whatever the chunk size)
        sample = sample_pass(source, stream_attributes(policy, source.columns), feature_spec=spec,
                             chunk_rows=65_536)[policy.protected]
        plan, aux = prepare_scoring(target, sample, policy=policy, feature_spec=spec, chunk_rows=65_536)
        del sample
        print(f"probe (float64, once per model): {plan.aux['batch_probe']}", flush=True)
        for chunk_rows in chunk_sizes:
            fails = {"target": 0, "aux": 0, "chunks": 0}
            for start, frame in source.iter_chunks(plan.columns, chunk_rows=chunk_rows):
                x = torch.from_numpy(encode_chunk(spec, frame.iloc[:8], source, start, min(8, len(frame))))
                fails["chunks"] += 1
                fails["target"] += old_probe_fails(lambda t: target(t), x)
                fails["aux"] += old_probe_fails(aux.outputs, x)
            out = Path(tmp) / f"scores-{chunk_rows}.parquet"
            t0 = time.perf_counter()
            try:
                summary = score_stream(target, path, policy=policy, feature_spec=spec, chunk_rows=chunk_rows,
                                       out_path=out).sections[0].summary
                run = {"chunk_rows": chunk_rows, "decision": summary.decision, "n_rows": summary.n_rows,
                       "n_flagged": summary.n_flagged, "flagged_fraction": summary.flagged_fraction, "reasons": summary.reasons[:2],
                       "batch_probe": summary.provenance["batch_probe"]}
            except Exception as exc:  # noqa: BLE001 - report it: the point is whether a clean stream is rejected
                run = {"chunk_rows": chunk_rows, "error": f"{type(exc).__name__}: {exc}"}
            run["wall_s"] = round(time.perf_counter() - t0, 1)
            run["old_probe_rejected_chunks"] = fails
            out.unlink(missing_ok=True)
            results["runs"].append(run)
            print(json.dumps(run), flush=True)
    decided = {(r.get("decision"), r.get("n_flagged")) for r in results["runs"]}
    results["same_result_every_chunk_size"] = len(decided) == 1 and not any("error" in r for r in results["runs"])
    print(f"same decision and flagged count for every chunk size: {results['same_result_every_chunk_size']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if results["same_result_every_chunk_size"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
