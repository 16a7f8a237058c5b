#!/usr/bin/env bash
# The GPU check's PyTorch step (bench/torch_reference_gpu.py, the bundle's
# torch_reference.py) run on the CPU, briefly, with numpy hidden (torch's
# wheels do not bring it): it must train, evaluate and end with the JSON
# line gpu_check.sh parses, for mnist_net and resnet20 (ctest
# torch_reference_script).
#   scripts/torch_reference_test.sh PYTHON
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${1:?usage: torch_reference_test.sh PYTHON}
data=${LOCKSTEP_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [[ ! -x $python ]] || ! "$python" -c 'import torch' 2>/dev/null || [[ ! -d $data ]]; then
  echo "torch_reference_test: no torch at $python or no Fashion-MNIST at $data" >&2
  [[ ${CI:-} == true ]] && exit 1
  exit 77
fi
# Each model it runs: mnist_net (the 32-epoch line) and resnet20.
for model in mnist_net resnet20; do
  out=$("$python" - "$root/bench/torch_reference_gpu.py" "$data" "$model" 2>&1 <<'PY'
import runpy, sys
sys.modules["numpy"] = None  # import numpy fails, as on a node without it
script, data, model = sys.argv[1], sys.argv[2], sys.argv[3]
sys.argv = [script, "--epochs", "1", "--device", "cpu", "--train-samples", "1024",
            "--test-samples", "1000", "--data-dir", data, "--model", model]
runpy.run_path(script, run_name="__main__")
PY
  ) || { echo "$out" >&2; echo "torch_reference_test: the script failed ($model)" >&2; exit 1; }
  last=$(tail -n1 <<<"$out")
  "$python" - "$last" "$model" <<'PY' || { echo "$out" >&2; exit 1; }
import json, sys
r = json.loads(sys.argv[1])
assert r["epochs"] == 1 and r["device"] == "cpu" and r["model"] == sys.argv[2], r
assert 0.0 < r["seconds"] and 0.0 < r["images_per_second"], r
assert 0.05 <= r["test_accuracy"] <= 1.0, r
PY
  grep -q '^epoch 1 test accuracy ' <<<"$out" || { echo "$out" >&2; exit 1; }
  echo "torch_reference_test: $last"
done
