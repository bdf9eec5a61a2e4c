#!/usr/bin/env bash
# OpenNMT-py 3.5.1 in its own virtual environment, for the peer runs of bench/opennmt/*.yaml.
#   bash bench/opennmt/install.sh [VENV]        (default /work/onmt/venv)
# OpenNMT-py 3.5.1 pins torch<2.3, which this Python 3.11 machine cannot get: it is installed
# with --no-deps over the current torch, and its other requirements one by one. It runs on
# torch 2.14.1 as is; only torch.load's weights_only default (True since torch 2.6) gets in the
# way of loading its checkpoints:
#   TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 onmt_translate -model run/model_step_N.pt ...   (and -train_from)
#   ct2-opennmt-py-converter --unsafe_deserialization --model_path ... --output_dir ...
# spacy and fasttext-wheel are needed although optional in use: onmt/transforms imports them all
# at start-up (terminology.py, clean.py), so no onmt_* command starts without them.
# OpenNMT 3.5.1 also resets its logger while building the data iterator, so `log_file` gets the
# start-up lines only; the per-step lines go to stderr (capture with 2>&1).
#
# pip freeze of the result (Python 3.11.7, 2026-11-25):
#   absl-py==2.5.1
#   annotated-doc==0.0.7
#   annotated-types==0.8.0
#   anyio==4.16.0
#   blinker==1.9.0
#   blis==1.3.4
#   catalogue==2.0.10
#   certifi==2026.10.19.post1
#   charset-normalizer==3.5.3
#   click==8.5.1
#   cloudpathlib==0.26.0
#   colorama==0.4.6
#   confection==1.3.4
#   ConfigArgParse==1.9.0
#   ctranslate2==4.8.5
#   cuda-bindings==13.5.0
#   cuda-pathfinder==1.9.1
#   cuda-toolkit==13.0.3.0
#   cymem==2.0.16
#   fasttext-wheel==0.9.2
#   filelock==4.3.1
#   Flask==3.1.3
#   fsspec==2026.9.0
#   grpcio==1.85.3
#   h11==0.16.0
#   httpcore==1.0.9
#   httpx==0.28.1
#   idna==3.20
#   itsdangerous==2.2.0
#   Jinja2==3.1.6
#   lxml==6.1.3
#   Markdown==3.11.3
#   markdown-it-py==4.3.0
#   MarkupSafe==3.0.4
#   mdurl==0.1.2
#   mock==5.2.0
#   mpmath==1.3.0
#   murmurhash==1.0.16
#   networkx==3.6.1
#   numpy==2.4.6
#   nvidia-cublas==13.1.1.3
#   nvidia-cuda-cupti==13.0.85
#   nvidia-cuda-nvrtc==13.0.88
#   nvidia-cuda-runtime==13.0.96
#   nvidia-cudnn-cu13==9.24.0.43
#   nvidia-cufft==12.0.0.61
#   nvidia-cufile==1.15.1.6
#   nvidia-curand==10.4.0.35
#   nvidia-cusolver==12.0.4.66
#   nvidia-cusparse==12.6.3.3
#   nvidia-cusparselt-cu13==0.8.1
#   nvidia-nccl-cu13==2.30.7
#   nvidia-nvjitlink==13.5.37
#   nvidia-nvshmem-cu13==3.4.5
#   nvidia-nvtx==13.0.85
#   OpenNMT-py==3.5.1
#   packaging==26.4
#   pillow==13.0.0
#   portalocker==4.4.2
#   preshed==3.0.15
#   protobuf==7.36.2
#   pyahocorasick==2.3.1
#   pybind11==3.1.0
#   pydantic==2.14.4
#   pydantic_core==2.50.5
#   Pygments==2.21.0
#   pyonmttok==1.38.1
#   PyYAML==6.0.4
#   RapidFuzz==3.14.6
#   regex==2026.11.19
#   requests==2.34.2
#   rich==15.0.0
#   sacrebleu==2.6.0
#   sentencepiece==0.2.3
#   shellingham==1.5.4
#   six==1.17.0
#   smart_open==9.0.2
#   spacy==3.8.18
#   spacy-legacy==3.0.12
#   spacy-loggers==1.0.5
#   srsly==2.5.6
#   subword-nmt==0.3.8
#   sympy==1.14.0
#   tabulate==0.10.0
#   tensorboard==2.21.0
#   tensorboard-data-server==0.7.2
#   thinc==8.3.14
#   torch==2.14.1
#   tqdm==4.70.1
#   triton==3.8.0
#   typer==0.29.2
#   typing-inspection==0.4.5
#   typing_extensions==4.16.0
#   urllib3==2.8.0
#   waitress==3.0.2
#   wasabi==1.1.3
#   weasel==1.0.1
#   Werkzeug==3.1.9
#   wrapt==2.5.2
set -euo pipefail
VENV=${1:-/work/onmt/venv}
python3 -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install torch==2.14.1                     # the newest this machine allows (torch<=2.14.1 cap)
"$PIP" install --no-deps OpenNMT-py==3.5.1       # its Requires-Dist torch<2.3,>=2.1 cannot be met
# The rest of its Requires-Dist (OpenNMT_py-3.5.1.dist-info/METADATA), plus what it uses unlisted.
for req in ConfigArgParse==1.9.0 ctranslate2==4.8.5 tensorboard==2.21.0 Flask==3.1.3 \
           waitress==3.0.2 pyonmttok==1.38.1 PyYAML==6.0.4 sacrebleu==2.6.0 RapidFuzz==3.14.6 \
           pyahocorasick==2.3.1 six==1.17.0 sentencepiece==0.2.3 subword-nmt==0.3.8 \
           spacy==3.8.18 fasttext-wheel==0.9.2; do
  "$PIP" install "$req"
done
# Smoke test: every entry point the benchmark uses starts.
for cmd in onmt_build_vocab onmt_train onmt_translate ct2-opennmt-py-converter; do
  "$VENV/bin/$cmd" -h >/dev/null 2>&1 || { echo "$cmd does not start" >&2; exit 1; }
done
echo "OpenNMT-py 3.5.1 ready in $VENV"
