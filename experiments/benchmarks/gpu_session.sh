#!/usr/bin/env bash
# The GPU check as one call of a lent device machine (WORKSPACE.md, "A lent GPU"): from the
# checkout carried there with .whl/ (../shared/gpu/wheels.sh) and .tfds/ (Brown, prepared by
# `python -m experiments.benchmarks.gpu --prepare_only --data_dir=.tfds --out=/tmp/prep`):
#
#   bash experiments/benchmarks/gpu_session.sh --rows=2,6,1,3,4,5 --budget_s=510   # first call
#   bash experiments/benchmarks/gpu_session.sh --rows=8,7 --budget_s=290           # second
#
# It installs the carried wheels into SITE (default /tmp/site; once per machine), runs
# experiments.benchmarks.gpu with --data_dir=.tfds and these flags into CHECK_DIR (default
# /tmp/gpu), and copies into OUT (the device call's $OUT, default /tmp/gpu_out) the report
# (gpu.md, gpu.json), the GPU's line from nvidia-smi, and rows.tgz: the rows' reports and
# printed output, not their checkpoints or data, which the call could not bring back. Its
# status is the check's. PYTHON (default python3) runs it. `--dry_run` instead of the rows
# runs it all at toy sizes on a CPU, as the tests do.
set -uo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-python3} site=${SITE:-/tmp/site} check=${CHECK_DIR:-/tmp/gpu}
out=${OUT:-/tmp/gpu_out}
mkdir -p "$out"
if [ -d .whl ] && [ ! -e "$site/.installed" ]; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl \
    && touch "$site/.installed" || { echo "error: the wheels in .whl/ did not install" >&2; exit 2; }
fi
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv \
    > "$out/nvidia-smi.csv" 2>&1
fi
"$python" -m experiments.benchmarks.gpu --data_dir=.tfds --out="$check" "$@"
status=$?
cp "$check"/gpu.md "$check"/gpu.json "$out"/ 2>/dev/null
if [ -d "$check/rows" ]; then
  (cd "$check" && find rows -type f -size -4M \( -name '*.md' -o -name '*.json' \
     -o -name '*.jsonl' -o -name '*.txt' \) -not -path '*/corpus/*' -not -path '*/tfds/*' \
     -print0 | tar --null -czf "$out/rows.tgz" -T -)
fi
exit $status
