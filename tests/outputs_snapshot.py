"""What seqtasks computes, written down so that a redesign can show it changed nothing.

    python tests/outputs_snapshot.py record DIR          # about 10 minutes on 2 cores
    python tests/outputs_snapshot.py compare BEFORE AFTER

`record` trains every task with every decoder family for twelve steps from the repository's
configs (tiny widths, tiny data, the CPU, one thread), through the installed `seqtasks` command
only, so the same calls run on the code before and after a move of its modules. It keeps, per
model: every tensor of the checkpoint (weights, optimizer state), the validation and test
metrics, what `translate`/`parse`/`caption` print with beam 1 and with beam 3 and an n-best
list, the attention the Python API returns, and what `evaluate` reports. `compare` says which
of those differ: tensors by `torch.equal`, texts and numbers exactly. Not a pytest module.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
FIXED = REPO / "tests" / "fixtures" / "pre_redesign"
DATES = ["the twenty-first of march 1948", "sunday 30 jul 1995", "3 february 2004", "", "may 1"]
REFERENCES = ["1948-03-21", "1995-07-30", "2004-02-03", "", "2001-05-01"]
SENTENCES = ["The dog barked .", "Stocks rose sharply in early trading .", "He said no ."]

RNN = "{class_path: seqtasks.encoders.RNNEncoder, init_args: {embed_dim: 8, hidden_size: 8, cell: gru, dropout: 0.0}}"  # noqa: E501
LSTM = "{class_path: seqtasks.encoders.RNNEncoder, init_args: {embed_dim: 8, hidden_size: 8, cell: lstm, dropout: 0.0}}"  # noqa: E501
TRANSFORMER = "{d_model: 16, num_heads: 2, num_layers: 1, ff_dim: 32, dropout: 0.0}"
T_ENCODER = f"{{class_path: seqtasks.encoders.TransformerEncoder, init_args: {TRANSFORMER}}}"
T_DECODER = f"{{class_path: seqtasks.decoders.TransformerDecoder, init_args: {TRANSFORMER}}}"
ADDITIVE = "{class_path: seqtasks.attention.AdditiveAttention, init_args: {attention_dim: 8}}"
PATCHES = "{class_path: seqtasks.encoders.PatchEncoder, init_args: {patch: 8, channels: [8, 8], coordinates: true}}"  # noqa: E501
SMALL_RNN = "embed_dim: 8, hidden_size: 8, dropout: 0.0"

# name: (task, repository config, the model's encoder and decoder)
MODELS = {
    "bahdanau": (
        "translation",
        "translation/dates.yaml",
        RNN,
        f"{{class_path: seqtasks.decoders.BahdanauDecoder, init_args: {{{SMALL_RNN}, "
        f"readout_dim: 8, attention: {ADDITIVE}}}}}",
    ),
    "luong_general": (
        "translation",
        "translation/dates.yaml",
        LSTM,
        f"{{class_path: seqtasks.decoders.LuongDecoder, init_args: {{{SMALL_RNN}, cell: lstm, "
        "attention: {class_path: seqtasks.attention.GeneralAttention}}}",
    ),
    "luong_multihead": (
        "translation",
        "translation/dates.yaml",
        RNN,
        f"{{class_path: seqtasks.decoders.LuongDecoder, init_args: {{{SMALL_RNN}, cell: gru, "
        "attention: {class_path: seqtasks.attention.MultiHeadAttention, "
        "init_args: {heads: 2}}}}",
    ),
    "no_attention": (
        "translation",
        "translation/dates.yaml",
        RNN,
        f"{{class_path: seqtasks.decoders.NoAttentionDecoder, init_args: {{{SMALL_RNN}, "
        "readout_dim: 8}}",
    ),
    "transformer": ("translation", "translation/dates.yaml", T_ENCODER, T_DECODER),
    "rnn_transformer": ("translation", "translation/dates.yaml", RNN, T_DECODER),
    "parsing_lstm": (
        "parsing",
        "parsing/lstm_attention_fast.yaml",
        LSTM,
        f"{{class_path: seqtasks.decoders.LuongDecoder, init_args: {{{SMALL_RNN}, cell: lstm, "
        f"input_feeding: true, attention: {ADDITIVE}}}}}",
    ),
    "parsing_transformer": ("parsing", "parsing/transformer.yaml", T_ENCODER, T_DECODER),
    "soft": (
        "captioning",
        "captioning/shapes_soft.yaml",
        PATCHES,
        f"{{class_path: seqtasks.decoders.SoftAttentionDecoder, init_args: {{{SMALL_RNN}, "
        f"attention: {ADDITIVE}}}}}",
    ),
    "hard": (
        "captioning",
        "captioning/shapes_hard.yaml",
        PATCHES,
        f"{{class_path: seqtasks.decoders.HardAttentionDecoder, init_args: {{{SMALL_RNN}, "
        f"attention: {ADDITIVE}}}}}",
    ),
    "show_tell": (
        "captioning",
        "captioning/shapes_no_attention.yaml",
        PATCHES,
        f"{{class_path: seqtasks.decoders.ShowTellDecoder, init_args: {{{SMALL_RNN}}}}}",
    ),
    "captioning_transformer": ("captioning", "captioning/transformer.yaml", PATCHES, T_DECODER),
}
DATA = {
    "translation": "{{data_dir: {work}/dates, num_train: 200}}",
    "parsing": "{{data_dir: {work}/ptb, min_count: 1000, test_split: dev}}",
    "captioning": "{{data_dir: {work}/shapes, counts: {{train: 16, val: 4, test: 4, holdout: 4}}, "
    "batch_size: 8}}",
}
PLACES = {
    "seconds",
    "checkpoint",
    "checkpoints",
    "gold_file",
    "pred_file",
    "hyp_file",
    "source",
    "gold",
    "src",
    "ref",
    "sentences_per_second",
}
IMAGE = re.compile(r'"image": "[^"]*/(shapes/images/[^"/]+)"')
METRIC = re.compile(r"((?:val|test)/[a-z_0-9]+)\s+(-?[0-9.]+)")


def seqtasks(args: list[str], stdin: str = "", failing: bool = False) -> str:
    """What the installed command prints on its standard output; stops on a failure, or with
    `failing` returns its last line of standard error, as what it said."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "CI": ""}
    done = subprocess.run(
        [sys.executable, "-m", "seqtasks", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    if done.returncode != 0 and failing:
        return json.dumps({"failed": done.stderr.strip().splitlines()[-1]})
    if done.returncode != 0:
        sys.exit(f"seqtasks {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def metrics(printed: str) -> dict[str, str]:
    """The `val/…` and `test/…` figures a run printed, the last of each, as printed."""
    return dict(METRIC.findall(printed))


def fit(name: str, work: Path) -> tuple[Path, dict]:
    """Train model `name` for 3 steps; its checkpoint and the metrics printed."""
    task, config, encoder, decoder = MODELS[name]
    root = work / "runs" / name
    shutil.rmtree(root, ignore_errors=True)  # a run of an earlier try
    overrides = [
        f"--model.init_args.encoder={encoder}",
        f"--model.init_args.decoder={decoder}",
        f"--data.init_args={DATA[task].format(work=work)}",
        "--trainer.max_steps=12",
        "--trainer.logger=false",
        "--trainer.callbacks=[]",
        "--trainer.enable_checkpointing=true",
        "--trainer.max_time=null",
        "--trainer.max_epochs=1",
        "--trainer.limit_val_batches=2",
        "--trainer.limit_test_batches=2",
        "--trainer.accelerator=cpu",
        f"--trainer.default_root_dir={root}",
    ]
    printed = seqtasks(["fit", "--config", str(REPO / "configs" / config), *overrides])
    (checkpoint,) = root.rglob("*.ckpt")
    printed += seqtasks(
        [
            "test",
            "--config",
            str(REPO / "configs" / config),
            *overrides,
            "--ckpt_path",
            str(checkpoint),
        ]
    )
    return checkpoint, metrics(printed)


def tensors(checkpoint: Path) -> dict:
    """Every tensor of a checkpoint's weights and optimizer state, by a path of keys."""
    import torch

    found: dict = {}

    def walk(value, path: str) -> None:
        if isinstance(value, torch.Tensor):
            found[path] = value
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}/{key}")
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")

    stored = torch.load(checkpoint, map_location="cpu", weights_only=False)
    walk({"state_dict": stored["state_dict"], "optimizers": stored["optimizer_states"]}, "")
    return found


def attention(task: str, checkpoint: Path, work: Path) -> dict:
    """The Python API's results with beam 3, n-best 2 and attention, as tensors and texts."""
    import torch

    import seqtasks as st

    torch.set_num_threads(1)
    model = st.load(checkpoint)
    if task == "translation":
        results = model.translate(DATES, beam=3, n_best=2, attention=model.gives_attention)
    elif task == "parsing":
        results = model.parse(SENTENCES, beam=3, n_best=2)
    else:
        images = sorted((work / "shapes" / "images").glob("test_*.png"))
        results = model.caption(images, beam=3, n_best=2, attention=model.gives_attention)
    found: dict = {}
    for i, result in enumerate(results):
        for j, one in enumerate([result, *result.alternatives]):
            fields = {k: v for k, v in vars(one).items() if k != "alternatives"}
            for key, value in fields.items():
                found[f"api/{i}/{j}/{key}"] = (
                    value if isinstance(value, torch.Tensor) or value is None else repr(value)
                )
    return found


def without_places(value):
    """A report without what differs from run to run: times and the paths of its files."""
    if isinstance(value, dict):
        return {k: without_places(v) for k, v in value.items() if k not in PLACES}
    if isinstance(value, list):
        return [without_places(v) for v in value]
    return value


def commands(task: str, checkpoint: Path, work: Path) -> dict[str, list[str]]:
    """What the commands print for a checkpoint: beam 1, beam 3 with n-best 3, evaluate."""
    ck = ["--checkpoint", str(checkpoint), "--device", "cpu"]
    printed: dict[str, list[str]] = {}
    for beam in ("1", "3"):
        search = ["--beam", beam, "--n-best", beam]
        if task == "translation":
            out = seqtasks(["translate", *ck, *search], "\n".join(DATES) + "\n")
        elif task == "parsing":
            out = seqtasks(
                ["parse", *ck, "--pretokenized", "--beam", beam], "\n".join(SENTENCES) + "\n"
            )
        else:
            images = sorted(map(str, (work / "shapes" / "images").glob("test_*.png")))
            out = seqtasks(["caption", *images, *ck, "--beam", beam])
        printed[f"{task} beam {beam}"] = [
            line for line in out.splitlines() if "|||" in line or "{" in line
        ]
    if task == "translation":
        src, ref = work / "dates.txt", work / "dates.iso"
        report = seqtasks(
            ["evaluate", "translation", *ck, "--src", str(src), "--ref", str(ref), "--json"]
        )
    elif task == "parsing":
        gold = ["--gold", str(FIXED / "dev5.mrg")]
        report = seqtasks(["evaluate", "parsing", *ck, *gold, "--beam", "3", "--json"])
    else:
        shapes = ["--source", str(work / "shapes"), "--split", "test"]
        report = seqtasks(
            ["evaluate", "captioning", *ck, *shapes, "--no-meteor", "--json"], failing=True
        )
    # the last JSON line: evaluate's progress lines go to standard error, printed after it here
    scores = without_places(json.loads([x for x in report.splitlines() if x[:1] == "{"][-1]))
    printed["evaluate"] = [json.dumps(scores, sort_keys=True)]
    return printed


def record(out: Path, names: list[str]) -> None:
    import torch

    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "dates.txt").write_text("\n".join(DATES) + "\n")
    (work / "dates.iso").write_text("\n".join(REFERENCES) + "\n")
    if not (work / "ptb").exists():
        subprocess.run(
            [
                sys.executable,
                str(REPO / "data_prep" / "ptb.py"),
                "--source",
                str(SHARED / "ptb_sample"),
                "--out",
                str(work / "ptb"),
            ],  # noqa: E501
            check=True,
            capture_output=True,
        )
    for name in names:
        task = MODELS[name][0]
        checkpoint, scores = fit(name, work)
        found = {f"weights{k}": v for k, v in tensors(checkpoint).items()}
        found |= attention(task, checkpoint, work)
        found["metrics"] = json.dumps(scores, sort_keys=True)
        for key, lines in commands(task, checkpoint, work).items():
            found[f"printed/{key}"] = "\n".join(lines)
        torch.save(found, out / f"{name}.pt")
        print(f"{name}: {len(found)} values, metrics {scores}", flush=True)


def compare(before: Path, after: Path) -> int:
    import torch

    differ = 0
    for old_file in sorted(before.glob("*.pt")):
        old = torch.load(old_file, weights_only=False)
        new_file = after / old_file.name
        if not new_file.exists():
            print(f"{old_file.stem}: missing after")
            differ += 1
            continue
        new = torch.load(new_file, weights_only=False)
        changed = sorted(set(old) ^ set(new))
        for key in sorted(set(old) & set(new)):
            a, b = old[key], new[key]
            if key == "printed/evaluate":  # a record's own report: its file names apart
                a, b = (json.dumps(without_places(json.loads(v)), sort_keys=True) for v in (a, b))
            if key.startswith("printed/captioning"):  # an image by its name in the world
                a, b = (IMAGE.sub(r'"image": "\1"', v) for v in (a, b))
            same = (
                torch.equal(a, b)
                if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                else a == b
            )
            if not same:
                changed.append(key)
        tensors_seen = sum(isinstance(v, torch.Tensor) for v in old.values())
        print(f"{old_file.stem}: {len(old)} values ({tensors_seen} tensors), {len(changed)} differ")
        for key in changed[:10]:
            print(f"    {key}: {str(old.get(key))[:200]!r} -> {str(new.get(key))[:200]!r}")
        differ += bool(changed)
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands_ = parser.add_subparsers(dest="command", required=True)
    rec = commands_.add_parser("record", help="train, decode and keep the outputs in DIR")
    rec.add_argument("out", type=Path)
    rec.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    cmp = commands_.add_parser("compare", help="which outputs differ between two records")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        record(args.out, args.models)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
