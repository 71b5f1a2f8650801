"""The end of a flow command run as the console script (faux_checks_app.lifecycle.finish_now): the threads' exit
callbacks and every atexit handler run, in the interpreter's order, stdout is flushed, and the exit code is the
command's; the interpreter's teardown of modules is what is skipped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import atexit, sys, threading
from faux_checks_app.lifecycle import finish_now
log = open(sys.argv[1], "w", buffering=1)
def late():
    log.write("thread callback\\n")
threading._register_atexit(late)
atexit.register(lambda: log.write("atexit\\n"))
class Teardown:
    def __del__(self):
        log.write("module teardown\\n")
keep = Teardown()
print("result on stdout", end="")   # no newline: still buffered when the process ends
finish_now(3)
log.write("after finish_now\\n")
"""


def test_finish_now_runs_the_exit_handlers_flushes_stdout_and_ends_with_the_code(tmp_path):
    log = tmp_path / "log.txt"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(log)], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 3
    assert done.stdout == "result on stdout"
    assert log.read_text().splitlines() == ["thread callback", "atexit"]   # no teardown, nothing after it
