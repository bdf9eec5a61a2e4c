#!/usr/bin/env bash
# The one-minute translation recipe (configs/translation/transformer_gpu.yaml) fitted once per
# variant, one after another on one GPU, each scored on test_2016_flickr with beam 5 (sacreBLEU,
# `seqtasks evaluate translation`): its best checkpoint by val BLEU, and the average of its last
# K weight snapshots (bench/recipe_average.yaml keeps one every 100 steps) for each K in $KS.
# From the checkout's root on the lent machine (pack .gpu/ first, bench/gpu_bundle.sh):
#   bash .gpu/run.sh bash bench/recipe_sweep.sh shipped lr2e-3 workers8
# A variant is a name in VARIANTS below (extra `seqtasks fit` arguments), with `@N` to run it
# again (shipped@2): the spread between runs of one variant is the yardstick. Logs and one line per
# scored checkpoint (sweep.tsv) go under $OUT. On a CPU, SMOKE=1 runs the plumbing in a minute.
set -u
OUT=${OUT:-/tmp/recipe_sweep}
DATA=${DATA:-data}
PY=${PYTHON:-python3}
KS=${KS:-3 5 8}
mkdir -p "$OUT"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
declare -A VARIANTS=(
  [shipped]=""
  [lr2e-3]="--model.init_args.optimizer.init_args.lr 0.002"
  [lr1e-3]="--model.init_args.optimizer.init_args.lr 0.001"
  [warmup150]="--model.init_args.lr_scheduler.init_args.warmup_steps 150"
  [workers8]="--data.init_args.num_workers 8"
  [dropout0.2]="--model.init_args.encoder.init_args.dropout 0.2 --model.init_args.decoder.init_args.dropout 0.2"
)
BASE=(--config configs/translation/transformer_gpu.yaml --config bench/recipe_average.yaml
      --data.init_args.data_dir "$DATA/multi30k")
if [ "${SMOKE:-0}" = 1 ]; then
  BASE+=(--trainer.accelerator cpu --trainer.precision 32-true --trainer.max_steps 8
         --trainer.val_check_interval 4 --data.init_args.max_tokens 600
         --data.init_args.num_workers 0 --trainer.limit_val_batches 1)
  KS=${KS_SMOKE:-2}
  sed 's/every_n_train_steps: 100/every_n_train_steps: 2/' bench/recipe_average.yaml >"$OUT/every2.yaml"
  BASE+=(--config "$OUT/every2.yaml")
fi
SRC=$DATA/multi30k/test_2016_flickr.de REF=$DATA/multi30k/test_2016_flickr.en
printf 'variant\tsteps\tcheckpoint\ttest BLEU\n' >"$OUT/sweep.tsv"
for name in "$@"; do
  key=${name%@*}
  [ -n "${VARIANTS[$key]+x}" ] || { echo "unknown variant $key: ${!VARIANTS[*]}" >&2; exit 2; }
  dir=$OUT/$name start=$SECONDS
  # shellcheck disable=SC2086  # a variant's arguments are words
  timeout --kill-after=10 110 "$PY" -m seqtasks fit "${BASE[@]}" ${VARIANTS[$key]} \
    --trainer.default_root_dir "$dir" >"$OUT/$name.fit.log" 2>&1
  echo "== $name: fit exit $? after $((SECONDS - start)) s"
  grep -e '^best' -e 'tok/s' "$OUT/$name.fit.log" | tail -n 4
  best=$(grep -o 'best val/bleu [^:]*: .*\.ckpt' "$OUT/$name.fit.log" | sed 's/.*: //' | tail -n 1)
  [ -n "$best" ] || continue
  snapshots=$(dirname "$best")
  steps=$(ls "$snapshots" | sed -n 's/^every-step\([0-9]*\)\.ckpt$/\1/p' | sort -n | tail -n 1)
  scored=("$best")
  for k in $KS; do
    "$PY" -m seqtasks average "$snapshots"/every-step*.ckpt --last "$k" --out "$dir/average$k.ckpt" \
      >>"$OUT/$name.average.log" 2>&1 && scored+=("$dir/average$k.ckpt")
  done
  timeout 90 "$PY" -m seqtasks evaluate translation --checkpoint "${scored[@]}" --src "$SRC" \
    --ref "$REF" --beam 5 --json >"$OUT/$name.test.log" 2>&1
  tail -n 1 "$OUT/$name.test.log" | "$PY" -c '
import json, sys
name, steps = sys.argv[1:3]
for model in json.loads(sys.stdin.read())["models"]:
    print(name, steps, model["checkpoint"].rsplit("/", 1)[-1], "%.2f" % model["bleu"], sep="\t")
' "$name" "${steps:-?}" >>"$OUT/sweep.tsv" || grep -v '^{' "$OUT/$name.test.log" | tail -n 5
  rm -f "$snapshots"/every-step*.ckpt "$dir"/average*.ckpt  # keep the best only
  echo "== $name: scored after $((SECONDS - start)) s"
done
column -t -s $'\t' "$OUT/sweep.tsv" 2>/dev/null || cat "$OUT/sweep.tsv"
