"""The reference fit's gradient-boosting folds run side by side on the threads torch had outside the fit
(``faux_checks._threads.thread_map``), each on one OpenMP thread, with the same models and the same test as one
thread gives."""

import ast
import contextlib
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

from faux_checks._threads import one_thread, thread_map
from faux_checks.method import joint_hold


@contextlib.contextmanager
def _torch_threads(n: int):
    """torch on n intra-op threads (the tests run on one), restored afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


#: Seconds a test waits for the other worker to reach the same point: far beyond a loaded runner's thread start.
MEET_S = 300


def test_thread_map_uses_torchs_outer_threads_in_order():
    seen: list = []
    both = threading.Barrier(2, timeout=MEET_S)

    def record(x: int) -> int:
        seen.append(threading.get_ident())
        return x * x

    def record_both(x: int) -> int:
        if x < 2:
            both.wait()                                                  # items 0 and 1 at once: two threads
        return record(x)

    with _torch_threads(2):
        assert thread_map(record, range(4)) == [0, 1, 4, 9]            # outside one_thread: serial
        assert set(seen) == {threading.get_ident()}
        seen.clear()
        with one_thread():
            assert thread_map(record_both, range(4)) == [0, 1, 4, 9]
        assert len(set(seen)) == 2 and threading.get_ident() not in seen
        seen.clear()
        assert thread_map(record, range(4)) == [0, 1, 4, 9]            # after one_thread: serial again
        assert set(seen) == {threading.get_ident()}


def test_thread_map_raises_the_first_failure_in_the_items_order_after_every_call_ran():
    ran: list = []
    second_failed = threading.Event()

    def fail_late(x: int) -> int:
        if x == 1:
            assert second_failed.wait(MEET_S)                            # item 2 fails before item 1 does
        ran.append(x)
        if x in (1, 2):
            if x == 2:
                second_failed.set()
            raise ValueError(f"item {x}")
        return x

    with _torch_threads(2), one_thread():
        try:
            thread_map(fail_late, range(4))
        except ValueError as err:
            assert str(err) == "item 1"
        else:
            raise AssertionError("thread_map returned past a failed call")
    assert sorted(ran) == [0, 1, 2, 3] and ran.index(2) < ran.index(1)


_OPENMP_IN_WORKERS = """
import threading, torch, sklearn.ensemble
from threadpoolctl import threadpool_info
from faux_checks._threads import one_thread, thread_map
count = lambda: [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "openmp"]
torch.set_num_threads(2)
fresh = []
threading.Thread(target=lambda: fresh.append(count())).start()
with one_thread():
    seen = thread_map(lambda x: (threading.Event().wait(0.05), count())[1], range(4))
print(repr((fresh[0], seen)))
"""


def test_each_worker_runs_one_openmp_thread_where_a_fresh_thread_would_run_more():
    """A Python thread starts at OpenMP's default count (OMP_NUM_THREADS, not the caller's limit): the tests' own
    OMP_NUM_THREADS=1 would hide a worker left at the default, so a process with the default at 2 is read."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"} | {"OMP_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", _OPENMP_IN_WORKERS], env=env, capture_output=True, text=True,
                         check=True).stdout
    fresh, seen = ast.literal_eval(out.strip().splitlines()[-1])
    assert fresh and set(fresh) == {2}                                  # every OpenMP runtime loaded (torch's, sklearn's)
    assert len(seen) == 4 and all(counts == [1] * len(fresh) for counts in seen)


def test_the_joint_test_reads_the_same_with_folds_side_by_side(monkeypatch):
    """A block of JOINT_THREADED_COLUMNS columns or more: its three folds on two threads give the figures and models
    of one thread. A narrower block is fitted on the caller's thread."""
    rng = np.random.default_rng(4)
    c = rng.integers(0, 2, 3000)
    X = rng.standard_normal((3000, 20))
    X[:, 0] *= np.where(c == 1, 1.6, 1.0)                               # c in the spread of one column
    spread: list = []
    real = joint_hold.thread_map
    monkeypatch.setattr(joint_hold, "thread_map", lambda fn, items: spread.append(fn) or real(fn, items))
    results = []
    for threads in (1, 2):
        with _torch_threads(threads), one_thread():
            results.append(joint_hold.block_capacity(X, c, kind="binary", seed=3))
    assert len(spread) == 2 and X.shape[1] >= joint_hold.JOINT_THREADED_COLUMNS
    one, two = results
    assert one["carries"] and one["rank_p_value"] < 1e-4
    # the figures the folds fitted one after another gave (2b47bb0): side by side they are the same
    assert (one["gain"], one["z"]) == (pytest.approx(0.004816428552044623, rel=1e-9),
                                       pytest.approx(0.7726586118535317, rel=1e-9))
    assert (one["gain"], one["z"], one["rank_p_value"]) == (two["gain"], two["z"], two["rank_p_value"])
    np.testing.assert_array_equal(one["_losses"], two["_losses"])
    for a, b in zip(one["_models"], two["_models"], strict=True):
        np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    with _torch_threads(2), one_thread():
        joint_hold.block_capacity(X[:, :2], c, kind="binary", seed=3)
    assert len(spread) == 2                                              # two columns: one fold after another


def test_the_informativeness_and_independence_tests_run_side_by_side_with_the_same_holds(monkeypatch):
    """reference_holds runs the permutation test on the hold-out rows and the chi-square tests on the reference rows
    at once: the same held features and the same tables as one after another."""
    from faux_checks.method import held as held_mod
    from faux_checks.method.auxiliary import AuxNet

    rng = np.random.default_rng(8)
    d = 12
    c = rng.integers(0, 2, 3000)
    X = rng.standard_normal((3000, d)).astype(np.float32)
    X[:, :3] += 0.8 * c[:, None]                                         # three columns carry c, nine do not
    torch.manual_seed(0)
    net = AuxNet(d, 2, (8,), torch.zeros(d), torch.ones(d)).eval()
    uninformative = held_mod.uninformative_features(net, X[2000:], c[2000:], kind="binary", groups=[[j] for j in range(d)])[0]
    independent = held_mod.independent_features(X[:2000], c[:2000], kind="binary", groups=[[j] for j in range(d)])[0]
    threads: dict = {}
    both = threading.Barrier(2, timeout=MEET_S)

    def wrapped(real, name: str, meet: bool):
        def run(*args, **kwargs):
            threads[name] = threading.get_ident()
            if meet:
                both.wait()                                              # the two tests at once
            return real(*args, **kwargs)
        return run

    real = {name: getattr(held_mod, name) for name in ("uninformative_features", "independent_features")}
    results = []
    for n in (1, 2):
        threads.clear()
        for name, fn in real.items():
            monkeypatch.setattr(held_mod, name, wrapped(fn, name, meet=n == 2))
        with _torch_threads(n), one_thread():
            results.append(held_mod.reference_holds(net, X[:2000], c[:2000], kind="binary", declared=np.zeros(d, bool),
                                                    groups=[[j] for j in range(d)], holdout=(X[2000:], c[2000:]),
                                                    hold_jointly=False))
    assert len(set(threads.values())) == 2                               # the last run: two threads
    one, two = results
    assert one.held.tolist() == two.held.tolist() == (uninformative | independent).tolist()
    assert one.held[3:].all() and not independent[:3].any() and uninformative.sum() < d   # both tests hold some
    assert one.informativeness == two.informativeness and one.independence == two.independence
    assert len(one.informativeness) == len(one.independence) == d
