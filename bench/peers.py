"""seqtasks against OpenNMT-py 3.5.1 and CTranslate2 on the same Transformer, on one machine, in
one run.

    python bench/peers.py --opennmt-venv ONMT_VENV [--data data/multi30k] [--work DIR]
        [--rounds 3] [--steps 100] [--warmup 10] [--sentences 1000] [--threads 2]
        [--seqtasks-checkpoint CKPT --opennmt-checkpoint PT] [--quick] [--json]

The model: `configs/translation/transformer.yaml` for seqtasks, `bench/opennmt/transformer.yaml`
for OpenNMT-py (same sizes, subwords, batch tokens, label smoothing, Adam betas and warm-up
schedule; what differs is listed at its top). ONMT_VENV is OpenNMT-py's own virtual environment
(bench/opennmt/install.sh). Every measurement runs in a child process with --threads threads and
OMP_WAIT_POLICY=PASSIVE, interleaved (seqtasks, OpenNMT-py, seqtasks, … --rounds times):
  1. training: --warmup + --steps optimiser steps of a fresh model, no validation; real target
     tokens/s (padding excluded, EOS included) over the last --steps, from each step's end time
     (seqtasks: bench/peers_clock.py; OpenNMT-py: its log at report_every 1); peak RSS;
  2. beam search (beam 5, batches of 2,000 source tokens) of the first --sentences sentences of
     test_2016_flickr: sentences/s and output tokens/s (subwords, EOS not counted), peak RSS,
     BLEU (sacreBLEU, cased) for seqtasks (with its exact and with its heuristic stopping rule,
     docs/transformer.md), OpenNMT-py (`onmt_translate`), and CTranslate2 in float32 and int8
     for OpenNMT-py's converted checkpoint and for seqtasks' export. The models
     are the given checkpoints (trained ones: outputs of a realistic length), else those of the
     last training round;
  3. the machine's float32 matmul rate (bench/matmul.py, each round) and the fraction of it that
     training reaches: useful FLOPs per target token (matrix products of the forward pass on the
     real, unpadded lengths of the training data, × 3 for the backward) × tokens/s.
Figures are min/median/max over rounds; ratios are of medians. --quick: 15 steps after 5, 200
sentences, outputs of at most 60 subwords (models of 20 steps write to the limit). With --json
the last stdout line is one JSON object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from peers_systems import ROOT, Systems, run  # noqa: E402

DECODERS = [  # (name, system, model key, compute type, seqtasks' stopping rule)
    ("seqtasks", "seqtasks", "seqtasks", "float32", "exact"),
    ("seqtasks heuristic", "seqtasks", "seqtasks", "float32", "heuristic"),
    ("opennmt", "opennmt", "opennmt", "float32", None),
    ("ct2(opennmt) fp32", "ctranslate2", "ct2_opennmt_float32", "float32", None),
    ("ct2(opennmt) int8", "ctranslate2", "ct2_opennmt_int8", "int8", None),
    ("ct2(seqtasks) fp32", "ctranslate2", "ct2_seqtasks_float32", "float32", None),
    ("ct2(seqtasks) int8", "ctranslate2", "ct2_seqtasks_int8", "int8", None),
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--opennmt-venv", type=Path, required=True)
    p.add_argument("--data", type=Path, default=Path("data/multi30k"))
    p.add_argument("--work", type=Path, default=None, help="default: a temporary folder")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=100, help="timed training steps a round")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps before them")
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seqtasks-checkpoint", default=None)
    p.add_argument("--opennmt-checkpoint", default=None)
    p.add_argument("--max-length", type=int, default=250,
                   help="output subwords at most, OpenNMT-py and CTranslate2 (seqtasks: its own "
                   "per-sentence limit)")  # fmt: skip
    p.add_argument("--quick", action="store_true",
                   help="--steps 15 --warmup 5 --sentences 200 --max-length 60")  # fmt: skip
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.warmup, args.sentences, args.max_length = 15, 5, 200, 60
    if not (args.opennmt_venv / "bin" / "onmt_train").exists():
        p.error(f"{args.opennmt_venv} has no bin/onmt_train: bash bench/opennmt/install.sh VENV")
    if not (args.data / "spm.de.model").exists():
        p.error(f"{args.data} has no spm.de.model: python data_prep/multi30k.py --out DIR")
    if (args.seqtasks_checkpoint is None) != (args.opennmt_checkpoint is None):
        p.error("give both --seqtasks-checkpoint and --opennmt-checkpoint, or neither")
    return args


def log(message: str) -> None:
    print(message, flush=True)


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def three(values: dict[str, float]) -> str:
    """A spread as `min / median / max`, thousands separated."""
    return " / ".join(f"{values[k]:7,.0f}" for k in ("min", "median", "max"))


def prepare(args: argparse.Namespace, opennmt: bool = True) -> Systems:
    """Pieces for OpenNMT-py (the project's sentencepiece models), its config and vocabularies
    (unless `opennmt` is false), and the test slice, in the working folder."""
    work = args.work
    onmt_bin = args.opennmt_venv / "bin" if opennmt else Path("/nonexistent/opennmt")
    encode = [sys.executable, str(ROOT / "bench/opennmt/encode.py"), "--data", str(args.data),
              "--out", str(work)]  # fmt: skip
    subprocess.run(encode, check=True, stdout=subprocess.DEVNULL)
    if opennmt:
        config = (ROOT / "bench/opennmt/transformer.yaml").read_text()
        (work / "transformer.yaml").write_text(config)
        (work / "run").mkdir(exist_ok=True)
        run([str(onmt_bin / "onmt_build_vocab"), "-config", "transformer.yaml", "-n_sample", "-1"],
            work, args.threads)  # fmt: skip
    head = lambda path: "".join(x + "\n" for x in path.read_text().splitlines()[: args.sentences])  # noqa: E731
    (work / "test.de").write_text(head(args.data / "test_2016_flickr.de"))
    (work / "test.en").write_text(head(args.data / "test_2016_flickr.en"))
    (work / "test.de.sp").write_text(head(work / "data" / "test_2016_flickr.de.sp"))
    return Systems(onmt_bin, args.data.resolve(), work, args.threads)


def flops_per_token(data: Path, config: Path, vocab: int) -> float:
    """Useful training FLOPs per real target token: the forward pass's matrix products (the
    layers' weights and the attention's QKᵀ and AV, on unpadded lengths with EOS; the decoder's
    self-attention over the whole prefix) summed over the training set, × 3 (backward = 2 ×
    forward), over its target tokens."""
    import yaml

    layers = yaml.safe_load(config.read_text())["model"]["init_args"]["encoder"]["init_args"]
    d, ff, n = layers["d_model"], layers["ff_dim"], layers["num_layers"]
    flops, tokens = 0.0, 0
    sources = (data / "train.de.sp").read_text().splitlines()
    targets = (data / "train.en.sp").read_text().splitlines()
    for src, tgt in zip(sources, targets, strict=True):
        s, t = len(src.split()) + 1, len(tgt.split()) + 1
        encoder = n * (2 * s * (4 * d * d + 2 * d * ff) + 4 * s * s * d)
        decoder = n * (2 * t * (6 * d * d + 2 * d * ff) + 2 * s * 2 * d * d + 4 * t * t * d
                       + 4 * t * s * d)  # fmt: skip
        flops += encoder + decoder + 2 * t * d * vocab
        tokens += t
    return 3 * flops / tokens


def matmul_rate(threads: int) -> float:
    """The best float32 `torch.mm` rate of bench/matmul.py, GFLOP/s (its bfloat16 one not timed)."""
    command = [sys.executable, str(ROOT / "bench/matmul.py"), "--threads", str(threads)]
    command += ["--bf16", "off", "--json"]
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    rates = json.loads(out.stdout.strip().splitlines()[-1])["gflops"]
    return max(r["fp32_torch_mm"] for r in rates.values())


def bleu(pieces_file: Path, references: Path, target_model: Path) -> float:
    import sacrebleu
    import sentencepiece as spm

    target = spm.SentencePieceProcessor(model_file=str(target_model))
    lines = pieces_file.read_text().splitlines()
    hypotheses = [target.decode_pieces(line.split()) for line in lines]
    return sacrebleu.corpus_bleu(hypotheses, [references.read_text().splitlines()]).score


def convert(systems: Systems, models: dict[str, str]) -> None:
    """CTranslate2 models of both checkpoints, float32 and int8."""
    for quantization in ("float32", "int8"):
        out = systems.work / f"ct2_opennmt_{quantization}"
        run([str(systems.onmt_bin / "ct2-opennmt-py-converter"), "--model_path",
             models["opennmt"], "--output_dir", str(out), "--quantization", quantization,
             "--force", "--unsafe_deserialization"], systems.work, systems.threads)  # fmt: skip
        out = systems.work / f"ct2_seqtasks_{quantization}"
        command = [sys.executable, "-m", "seqtasks", "export", models["seqtasks"],
                   "--to", "ctranslate2", str(out), "--force"]  # fmt: skip
        if quantization == "int8":
            command += ["--quantization", "int8"]
        run(command, systems.work, systems.threads)
        models[f"ct2_opennmt_{quantization}"] = str(systems.work / f"ct2_opennmt_{quantization}")
        models[f"ct2_seqtasks_{quantization}"] = str(out)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="peers-") as scratch:
        args.work = (args.work or Path(scratch)).resolve()
        args.work.mkdir(parents=True, exist_ok=True)
        return measure(args)


def measure(args: argparse.Namespace) -> dict:
    systems = prepare(args)
    log(f"peers: {platform.processor() or platform.machine()}, {args.threads} threads, "
        f"{args.rounds} rounds, work in {args.work}")  # fmt: skip
    train = {"seqtasks": [], "opennmt": []}
    rates = []
    for r in range(args.rounds):
        rates.append(matmul_rate(args.threads))
        total = args.warmup + args.steps
        for name, trainer in (("seqtasks", systems.train_seqtasks),
                              ("opennmt", systems.train_opennmt)):  # fmt: skip
            result = trainer(f"train_{name}_{r}", total, args.warmup)
            train[name].append(result)
            log(f"round {r + 1} training {name}: {result['tokens_per_s']:,.0f} tgt tok/s, "
                f"peak {result['peak_mb']:,.0f} MB")  # fmt: skip
    models = {name: runs[-1]["model"] for name, runs in train.items()}
    if args.seqtasks_checkpoint:
        models = {"seqtasks": str(Path(args.seqtasks_checkpoint).resolve()),
                  "opennmt": str(Path(args.opennmt_checkpoint).resolve())}  # fmt: skip
    convert(systems, models)
    decode = {name: [] for name, *_ in DECODERS}
    for r in range(args.rounds):
        for name, system, key, compute_type, stop in DECODERS:
            source = args.work / ("test.de" if system == "seqtasks" else "test.de.sp")
            out = args.work / f"out_{key}_{stop or 'own'}_{r}.en.sp"
            result = systems.decode(system, models[key], source, out, 5, compute_type,
                                    args.max_length, stop)  # fmt: skip
            result["bleu"] = bleu(out, args.work / "test.en", args.data / "spm.en.model")
            decode[name].append(result)
            log(f"round {r + 1} beam 5 {name}: {result['sentences_per_s']:.1f} sent/s, "
                f"{result['tokens_per_s']:,.0f} tok/s, BLEU {result['bleu']:.2f}")  # fmt: skip
    return report(args, train, decode, rates)


def report(args: argparse.Namespace, train: dict, decode: dict, rates: list[float]) -> dict:
    import sentencepiece as spm

    vocab = spm.SentencePieceProcessor(model_file=str(args.data / "spm.en.model")).vocab_size()
    flop = flops_per_token(args.work / "data", ROOT / "configs/translation/transformer.yaml",
                           vocab)  # fmt: skip
    matmul = spread(rates)
    result = {"machine": platform.processor() or platform.machine(), "threads": args.threads,
              "rounds": args.rounds, "steps": args.steps, "sentences": args.sentences,
              "matmul_gflops": matmul, "train_mflop_per_token": flop / 1e6,
              "train": {}, "decode": {}}  # fmt: skip
    log(f"\nfloat32 matmul rate {matmul['median']:.0f} GFLOP/s (min {matmul['min']:.0f}, max "
        f"{matmul['max']:.0f}); useful training FLOPs {flop / 1e6:.1f} M a tgt token")  # fmt: skip
    log("training, real target tokens/s (min / median / max) | peak MB | of matmul rate")
    for name, runs in train.items():
        speed = spread([x["tokens_per_s"] for x in runs])
        peak = spread([x["peak_mb"] for x in runs])
        fraction = speed["median"] * flop / 1e9 / matmul["median"]
        result["train"][name] = {"tokens_per_s": speed, "peak_mb": peak,
                                 "matmul_fraction": fraction}  # fmt: skip
        log(f"  {name:<20} {three(speed)} | {peak['median']:6,.0f} | {100 * fraction:4.1f} %")
    log("beam 5: sentences/s, output tokens/s (min / median / max) | peak MB | BLEU")
    for name, runs in decode.items():
        sents = spread([x["sentences_per_s"] for x in runs])
        toks = spread([x["tokens_per_s"] for x in runs])
        result["decode"][name] = {"sentences_per_s": sents, "tokens_per_s": toks,
                                  "peak_mb": spread([x["peak_mb"] for x in runs]),
                                  "bleu": runs[-1]["bleu"],
                                  "tokens": runs[-1]["tokens"]}  # fmt: skip
        log(
            f"  {name:<20} {sents['median']:6.1f} | {three(toks)} | "
            f"{result['decode'][name]['peak_mb']['median']:6,.0f} | {runs[-1]['bleu']:.2f}"
        )

    def ratio(part: str, name: str, other: str, key: str) -> float | None:
        """Of medians; None where the other's is 0 (untrained models may write nothing)."""
        below = result[part][other][key]["median"]
        return result[part][name][key]["median"] / below if below else None

    def times(value: float | None) -> str:
        return "n/a (nothing decoded)" if value is None else f"{value:.2f}×"

    result["train_ratio"] = ratio("train", "seqtasks", "opennmt", "tokens_per_s")
    result["memory_ratio"] = ratio("train", "seqtasks", "opennmt", "peak_mb")
    result["beam_ratio"] = ratio("decode", "seqtasks", "opennmt", "tokens_per_s")
    result["beam_ratio_heuristic"] = ratio(
        "decode", "seqtasks heuristic", "opennmt", "tokens_per_s"
    )
    result["ct2_fp32_ratio"] = ratio("decode", "seqtasks", "ct2(opennmt) fp32", "tokens_per_s")
    log(f"seqtasks ÷ OpenNMT-py: training {times(result['train_ratio'])}, peak memory "
        f"{times(result['memory_ratio'])}, beam-5 tokens/s {times(result['beam_ratio'])} "
        f"({times(result['beam_ratio_heuristic'])} with the heuristic stop); "
        f"÷ CTranslate2 fp32 (OpenNMT-py's) {times(result['ct2_fp32_ratio'])}")  # fmt: skip
    if args.json:
        print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
