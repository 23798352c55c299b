#!/usr/bin/env bash
# The GPU job, runnable locally on a machine with a GPU: materialise the patched Megatron tree and
# run the regression suite's GPU tests on it (`rebasectl test --gpu`).
#
# Environment: REBASECTL (default `rebasectl`), REBASECTL_DIR (default .), REBASECTL_UPSTREAM,
# ARTIFACTS (default artifacts/gpu; test.json is written there), MULTI_GPU=N (only the
# multi_gpu tests, `rebasectl test --multi-gpu N`: torchrun, N ranks).
# Exit: 0 passed, 3 regression tests failed, 2 bad input.
set -uo pipefail
REBASECTL=${REBASECTL:-rebasectl}
DIR=${REBASECTL_DIR:-.}
ARTIFACTS=${ARTIFACTS:-artifacts/gpu}
mkdir -p "$ARTIFACTS"
up=()
[ -n "${REBASECTL_UPSTREAM:-}" ] && up=(--upstream "$REBASECTL_UPSTREAM")

nvidia-smi -L || { echo "::error::no GPU visible to this runner"; exit 2; }
if [ -n "${MULTI_GPU:-}" ]; then
  # the multi_gpu tests alone, under torchrun with one rank per GPU
  $REBASECTL -C "$DIR" test --multi-gpu "$MULTI_GPU" "${up[@]}" --json > "$ARTIFACTS/test.json"
else
  $REBASECTL -C "$DIR" test --gpu "${up[@]}" --json > "$ARTIFACTS/test.json"
fi
rc=$?
python3 - "$ARTIFACTS/test.json" <<'PY' || true
import json, sys
data = json.load(open(sys.argv[1]))
print(f"{data['result']} on {data['tree']}")
for p in data["patches"]:
    print(f"  {p['id']}: {p['passed']} passed, {p['failed']} failed, {p['skipped']} skipped")
    for failure in p["failures"]:
        print(f"::error::{p['id']}: {failure}")
PY
exit "$rc"
