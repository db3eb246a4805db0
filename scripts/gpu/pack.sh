#!/usr/bin/env bash
# Run where PyPI and ../shared are reachable (the development machine): packs what the GPU machine lacks into
# ./.gpu (git-ignored), which the device command carries (`carry: [".gpu"]`; 64 MiB in all, this is ~20 MB):
#   .gpu/wheels/  the wheels the H200 image lacks (Python 3.12, x86-64; checked against the image's package
#                 list): bitsandbytes (without the kernels for CUDA/ROCm versions other than 13.x), datasets,
#                 liger-kernel, igraph, what graphctx imports (markdownify, pyoxigraph) and mistral-common
#                 (graphctx reads only its Llama tokenizer.model); and transformers 5.25 with what it needs
#                 that the image lacks or holds older (kernels, tomlkit, huggingface-hub 2.4 with hf-xet,
#                 httpx2, httpcore2, truststore, click; regex) and peft, so the GPU figures are on the
#                 transformers CI installs (install.sh falls back to the image's when they do not import);
#                 scripts/gpu/install.sh installs them there
#   .gpu/data/cardano/  the cardano.stackexchange.com dump (real lengths and prompts for the benchmarks;
#                 ../shared beside the checkout does not travel)
set -euo pipefail
cd "$(dirname "$0")/../.."
data=${1:-../shared/data/stackexchange/cardano}
[ -f "$data/Posts.xml" ] || { echo "scripts/gpu/pack.sh: no Posts.xml in $data" >&2; exit 1; }
rm -rf .gpu && mkdir -p .gpu/wheels .gpu/data
cp -r "$data" .gpu/data/cardano && chmod -R u+w .gpu/data
dest=.gpu/wheels
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d "$dest" \
  bitsandbytes==0.50.2 datasets==5.2.0 'dill<0.4.2' 'multiprocess<0.70.20' liger-kernel==0.8.5 \
  networkx==3.6.1 igraph==1.0.0 texttable==1.7.2 beautifulsoup4==4.15.0 soupsieve==4.1.3 markdownify==1.2.3 \
  pyoxigraph==0.5.13 mistral-common==1.13.1 \
  transformers==5.25.0 kernels==0.19.1 tomlkit==0.15.3 huggingface-hub==2.4.0 hf-xet==1.8.0 httpx2==2.17.0 \
  httpcore2==2.17.0 truststore==0.10.5 click==8.5.1 \
  anyio==4.16.0 idna==3.21 h11==0.16.0 typing-extensions==4.16.0 regex==2026.12.2 peft==0.21.2
python3 - "$dest" <<'PY'
"""Rewrite the bitsandbytes wheel without the CUDA/ROCm kernels the H200 image cannot use."""
import base64, hashlib, pathlib, re, sys, zipfile

wheel = next(pathlib.Path(sys.argv[1]).glob("bitsandbytes-*.whl"))
keep = re.compile(r"libbitsandbytes_(cpu|cuda13\d)\.so$")
entries = {}
with zipfile.ZipFile(wheel) as source:
    for info in source.infolist():
        name = info.filename
        if "libbitsandbytes_" in name and not keep.search(name):
            continue
        entries[name] = source.read(name)
record = next(name for name in entries if name.endswith(".dist-info/RECORD"))
lines = []
for name, data in entries.items():
    if name == record:
        continue
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    lines.append(f"{name},sha256={digest},{len(data)}")
entries[record] = ("\n".join(lines + [f"{record},,"]) + "\n").encode()
with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as target:
    for name, data in entries.items():
        target.writestr(name, data)
PY
ls -la "$dest"; du -sh .gpu
