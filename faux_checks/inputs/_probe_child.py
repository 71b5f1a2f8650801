"""Child of :func:`faux_checks.inputs.limits.probe_load`: limit memory, then load one model file (private).

Run by path (``python _probe_child.py FORMAT PATH MEMORY_MIB TRUSTED_JSON``), so that it imports the
model's library only. Exit 0: loaded; 3: a Python error (its type and message on stderr); a signal or
another code: the loader died.
"""

import json
import resource
import sys


def main() -> int:
    fmt, path, memory_mib, trusted = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    limit = memory_mib << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        if fmt == "lightgbm":
            import lightgbm

            lightgbm.Booster(model_file=path)
        elif fmt == "xgboost":
            import xgboost

            xgboost.Booster(model_file=path)
        elif fmt == "onnx":
            import onnxruntime

            onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        elif fmt == "skops":
            import skops.io as sio

            untrusted = sio.get_untrusted_types(file=path)
            if set(untrusted) - set(trusted):   # the caller refuses it without building anything
                return 0
            sio.load(path, trusted=list(untrusted))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
        print(f"{type(exc).__name__}: {str(exc)[:500]}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
