#!/usr/bin/env bash
# Run on the GPU machine, in the repository root, with ./.whl carried over (scripts/gpu/fetch_wheels.sh):
# installs those wheels, without touching the network or the image's own packages, into ./.gpu-site
# (git-ignored). benchmarks/gpu_suite.py puts ./.gpu-site and the repository first on the import path of
# everything it runs; for a command of your own: export PYTHONPATH=$PWD/.gpu-site:$PWD
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! ls .whl/*.whl >/dev/null 2>&1; then
  echo "scripts/gpu/install.sh: no wheels in $PWD/.whl: run scripts/gpu/fetch_wheels.sh where PyPI is reachable and carry .whl" >&2
  exit 1
fi
rm -rf .gpu-site
python3 -m pip install -q --no-index --no-deps --target .gpu-site .whl/*.whl
echo "installed into $PWD/.gpu-site: $(ls .whl | tr '\n' ' ')"
