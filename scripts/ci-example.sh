#!/usr/bin/env bash
# The CI step of docs/ci.md: gate the new versions of a registered model, keep the JSON Lines, and let the
# exit code decide the pipeline: 0 passed, 1 failed (deployment blocked), 2 undecided (not enough evidence),
# 3 configuration error (nothing was recorded: fix the policy, data or model name and rerun).
#
#   scripts/ci-example.sh MODEL_NAME AUDIT_DATA [POLICY_TOML]
#
# Environment: FAUX_CHECKS (the command, default `faux-checks`), MLFLOW_TRACKING_URI (the registry),
# GATE_JSON (where the JSON Lines go, default gate.jsonl), PYTHON (to summarise them, default python3).
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 MODEL_NAME AUDIT_DATA [POLICY_TOML]" >&2
  exit 64
fi
model=$1 data=$2 policy=${3:-}
out=${GATE_JSON:-gate.jsonl}
args=(gate "$model" --data "$data" --json --quiet)
if [ -n "$policy" ]; then args+=(--policy "$policy"); fi

# shellcheck disable=SC2086  # FAUX_CHECKS may be a command with arguments (`python -m faux_checks_app.cli`)
${FAUX_CHECKS:-faux-checks} "${args[@]}" > "$out"
code=$?

# one line per version from the JSON (stdout holds nothing else)
"${PYTHON:-python3}" - "$out" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    what = "skipped" if o.get("skipped") else (o.get("error") or o["decision"])
    version = o["model"].get("version") or "-"
    print(f"  v{version}: {what} (exit {o['exit_code']}): {(o.get('reasons') or [''])[0][:160]}")
PY

case $code in
  0) echo "fairness gate: passed (or nothing new to gate); '$model@deployable' may be deployed" ;;
  1) echo "fairness gate: FAILED, deployment of '$model' blocked; reports: see $out" ;;
  2) echo "fairness gate: UNDECIDED (not enough evidence, or an error while checking); nothing was promoted" ;;
  3) echo "fairness gate: CONFIGURATION ERROR, nothing was recorded; fix the policy/data/model name and rerun" ;;
  *) echo "fairness gate: stopped with exit code $code" ;;
esac
exit $code
