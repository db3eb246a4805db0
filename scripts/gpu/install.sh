#!/usr/bin/env bash
# Run on the GPU machine, in the repository root, with ./.gpu carried over (made by scripts/gpu/pack.sh):
# installs its wheels, offline and without touching the image's own packages, into ./.gpu/site.
# benchmarks/gpu_suite.py puts ./.gpu/site and the repository first on the import path of everything it runs
# and reads the data from ./.gpu/data; for a command of your own: export PYTHONPATH=$PWD/.gpu/site:$PWD
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! ls .gpu/wheels/*.whl >/dev/null 2>&1; then
  echo "scripts/gpu/install.sh: no wheels in $PWD/.gpu/wheels: run scripts/gpu/pack.sh where PyPI is reachable and carry .gpu" >&2
  exit 1
fi
rm -rf .gpu/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .gpu/site .gpu/wheels/*.whl
# transformers 5.25 and its companions override the image's only when they import there (a missing
# dependency of theirs in the image): else they are removed and the image's transformers is used (reported)
if ! PYTHONPATH=$PWD/.gpu/site python3 -c "from transformers import LlamaForCausalLM, GenerationConfig; import peft" 2>.gpu/transformers.err; then
  echo "scripts/gpu/install.sh: the packed transformers does not import here ($(tail -1 .gpu/transformers.err)); using the image's" >&2
  for name in transformers kernels tomlkit huggingface_hub hf_xet httpx2 httpcore2 truststore click anyio idna h11 typing_extensions regex peft; do
    rm -rf .gpu/site/"$name" .gpu/site/"$name"-*.dist-info
  done
fi
echo "installed into $PWD/.gpu/site: $(ls .gpu/wheels | tr '\n' ' ')"
