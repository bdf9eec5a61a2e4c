"""Benchmark a seqtasks translation config against a plain-PyTorch reference of the same size.

    python bench/translation.py [--config configs/translation/transformer.yaml] [--checkpoint CKPT]
        [--data data/multi30k] [--steps N] [--sentences N] [--beam 5] [--threads 2] [--json]
        [-- CONFIG OVERRIDES, e.g. --data.init_args.src_lang en --data.init_args.tgt_lang de]

Measured in one process, on the CPU with --threads threads:
  1. training throughput, real (non-pad) target tokens/s over --steps optimizer steps after
     --warmup steps. Ours: the model and DataModule built from the config by SeqtasksCLI,
     token-bucketed batches from `train_dataloader()`, `task.token_loss`, the config's optimizer
     and gradient clipping, in a plain loop (no Trainer). Reference: the module registered for
     the config's decoder class in REFERENCES (the tutorial-style model, same widths), batches of
     a fixed number of sentences in random order, that number chosen so that the average real
     target tokens per batch equals ours over an epoch; same loss, optimizer and clipping.
  2. beam search on the first --sentences sentences of the test split: ours batched
     (`task.decode` over token-bucketed batches of ~--decode-tokens source tokens) against the
     reference's decoding when its module offers `decoding_like(task)` (the Transformer: the
     same weights in nn.Transformer, re-running the prefix at every step, same batches), else
     the same model's beam search one sentence at a time (batch of 1). With --checkpoint the trained
     model decodes; without it, the model after the training steps above (output lengths, and so
     the timings, then differ from a trained model's).
  3. peak RSS (ru_maxrss): after ours (training + batched decoding, which run first) and for
     the whole process (the reference's training and the per-sentence decoding run after).

Adding a reference for another decoder family: write bench/reference_X.py with
`build_like(task)`, `make_batch(...)`, `batch_loss(...)`, `SUMMARY` and optionally
`decoding_like(task)` (see reference_rnn.py, reference_transformer.py) and register it in
REFERENCES; the ours-side measurement needs no change.

The reference depends on the decoder family (REFERENCES, by decoder class name); a config with no
reference gets the ours-side figures only. With --json the last stdout line is one JSON object.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Iterator, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from seqtasks.training.precision import PRECISIONS, inference_precision  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the reference_* modules

# Decoder class name -> module in bench/ providing build_like / make_batch / batch_loss.
REFERENCES = {"BahdanauDecoder": "reference_rnn", "TransformerDecoder": "reference_transformer"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/translation/transformer.yaml")
    p.add_argument("--checkpoint", default=None, help="trained model used for decoding")
    p.add_argument("--data", default="data/multi30k")
    p.add_argument("--steps", type=int, default=20, help="timed optimizer steps per model")
    p.add_argument("--warmup", type=int, default=2, help="untimed optimizer steps before them")
    p.add_argument("--sentences", type=int, default=1000, help="test sentences to decode")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--decode-tokens", type=int, default=2000,
                   help="source tokens per batch of batched beam search")  # fmt: skip
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="decoding threads taking batches in turn, one core each, ours and the reference "
        "(default: --threads; 1: one batch at a time on all threads)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-reference", action="store_true", help="measure ours only")
    p.add_argument("--train-precision", default="32", choices=["32", "bf16-mixed"],
                   help="bf16-mixed: forward passes under bfloat16 autocast, as Lightning's "
                   "flag of that name (ours and the reference alike)")  # fmt: skip
    p.add_argument(
        "--precisions",
        nargs="+",
        default=["32"],
        choices=PRECISIONS,
        help="also decode ours in these precisions (the reference runs in 32)",
    )
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    argv = sys.argv[1:] if argv is None else list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:split])
    args.overrides = argv[split + 1 :]  # passed on to the config, as `seqtasks fit` takes them
    if args.steps < 1 or args.warmup < 0 or args.sentences < 1 or args.beam < 1:
        p.error("need --steps >= 1, --warmup >= 0, --sentences >= 1, --beam >= 1")
    return args


def resolve(path: str | None) -> str | None:
    """A path as given if it exists from here, else relative to the repository root."""
    if path is None or Path(path).exists() or not (ROOT / path).exists():
        return path
    return str(ROOT / path)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def log(msg: str) -> None:
    print(msg, flush=True)


# ---- building ours from the config ----------------------------------------------------------
def build_from_config(config: str, data_dir: str, overrides: Sequence[str] = ()):
    """(task, datamodule, gradient clip value) exactly as `seqtasks fit --config` builds them,
    with `overrides` (command-line options of `seqtasks fit`) applied."""
    from seqtasks.cli.main import SeqtasksCLI

    cli = SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_callback=None,
        run=False,
        args=["--config", config, "--data.init_args.data_dir", data_dir,
              "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
              *overrides],
    )  # fmt: skip
    clip = cli.trainer.gradient_clip_val
    algorithm = cli.trainer.gradient_clip_algorithm or "norm"
    if clip and algorithm != "norm":
        raise SystemExit(f"gradient_clip_algorithm={algorithm} is not supported by the benchmark")
    return cli.model, cli.datamodule, float(clip or 0.0)


# ---- training throughput --------------------------------------------------------------------
def cycle_loader(loader) -> Iterator:
    """Batches of the DataLoader, epoch after epoch (set_epoch reshuffles as the Trainer does)."""
    epoch = 0
    while True:
        sampler = loader.batch_sampler
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def random_batches(n_examples: int, batch_size: int, seed: int) -> Iterator[list[int]]:
    """Fixed-size batches of example indices in random order, reshuffled each epoch."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(n_examples, generator=generator).tolist()
        for start in range(0, n_examples - batch_size + 1, batch_size):
            yield order[start : start + batch_size]


def timed_steps(step, batches: Iterator, steps: int, warmup: int) -> dict:
    """Run warmup + steps calls of `step(batch) -> (loss, real tokens)`; time the last `steps`,
    batch fetching and collation included."""
    losses, tokens, start = [], 0, time.perf_counter()
    for i in range(warmup + steps):
        if i == warmup:
            tokens, start = 0, time.perf_counter()
        loss, n = step(next(batches))
        losses.append(loss)
        tokens += n
    seconds = time.perf_counter() - start
    return {
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "s_per_step": seconds / steps,
        "first_loss": losses[0],
        "last_loss": losses[-1],
    }


def training_autocast(args) -> torch.autocast:
    """The forward pass's precision: float32, or bfloat16 autocast for --train-precision
    bf16-mixed (the backward pass runs outside it, as in Lightning)."""
    return torch.autocast("cpu", torch.bfloat16, enabled=args.train_precision == "bf16-mixed")


def train_ours(task, datamodule, clip: float, args) -> dict:
    from seqtasks.data.tokenizer import PAD_ID

    task.train()
    optimizer = task.optimizer(task.parameters())
    params = [p for p in task.parameters() if p.requires_grad]

    def step(batch):
        optimizer.zero_grad(set_to_none=True)
        with training_autocast(args):
            output = task(batch.src, batch.src_mask, batch.tgt_in)
            loss, _ = task.objective.token_loss(output.logits, batch.tgt_out)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        return loss.item(), int((batch.tgt_out != PAD_ID).sum())

    result = timed_steps(step, cycle_loader(datamodule.train_dataloader()), args.steps,
                         args.warmup)  # fmt: skip
    result["optimizer"] = type(optimizer).__name__
    return result


def train_reference(ref_module, reference, task, datamodule, clip: float, args) -> dict:
    from seqtasks.data.tokenizer import BOS_ID, EOS_ID, PAD_ID

    dataset = datamodule.datasets["fit"]
    examples = dataset.examples
    # Our batches over one epoch: their mean real target tokens (len + EOS) sets the reference's
    # sentences per batch (same mean tokens per batch = n_examples / n_batches sentences).
    n_batches = len(datamodule.train_dataloader().batch_sampler.batches)
    batch_size = max(1, round(len(examples) / n_batches))
    mean_tgt = sum(len(e.tgt) + 1 for e in examples) / len(examples)

    reference.train()
    optimizer = task.optimizer(reference.parameters())  # the config's optimizer, same settings
    params = list(reference.parameters())
    smoothing = float(getattr(task, "label_smoothing", 0.0))

    def step(indices):
        batch = [examples[i] for i in indices]
        src, trg = ref_module.make_batch([e.src for e in batch], [e.tgt for e in batch],
                                         PAD_ID, BOS_ID, EOS_ID)  # fmt: skip
        optimizer.zero_grad(set_to_none=True)
        with training_autocast(args):
            loss, n = ref_module.batch_loss(reference, src, trg, smoothing, PAD_ID)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        return loss.item(), n

    result = timed_steps(step, random_batches(len(examples), batch_size, args.seed), args.steps,
                         args.warmup)  # fmt: skip
    result.update(batch_sentences=batch_size, ours_batches_per_epoch=n_batches,
                  mean_batch_tokens=batch_size * mean_tgt)  # fmt: skip
    return result


# ---- decoding -------------------------------------------------------------------------------
def test_sources(model, datamodule, n: int) -> list[list[int]]:
    """The first n test sources, encoded with the decoding model's own tokeniser when it has one
    (a checkpoint carries it), cut to the DataModule's max_length as in evaluation."""
    from seqtasks.data.text import read_lines
    from seqtasks.data.translation import encode_source

    tokenizer = getattr(model, "src_tokenizer", None) or datamodule.src_tokenizer
    split = datamodule.splits["test"]
    path = Path(datamodule.data_dir) / f"{split}.{datamodule.src_lang}"
    lines = read_lines(path)[:n]
    return [encode_source(tokenizer, line.strip(), datamodule.max_length) for line in lines]


def decode_all(
    decode, sources: list[list[int]], beam: int, max_tokens: int | None, workers: int | None
) -> dict:
    """Beam search with `decode(src, src_mask, beam_size)` (`task.decode` or a reference's) over
    `sources`: token-bucketed batches of about `max_tokens` source tokens, or one sentence at a
    time when `max_tokens` is None, shared among `workers` one-core threads as
    `TranslationTask.translate` shares them (`run_batches`). Returns time, outputs and counts."""
    from seqtasks.data.batch import pad
    from seqtasks.data.batching import TokenBucketSampler
    from seqtasks.data.tokenizer import EOS_ID, PAD_ID
    from seqtasks.search import run_batches

    lengths = [len(s) + 1 for s in sources]
    if max_tokens is None:
        chunks = [[i] for i in range(len(sources))]
    else:
        chunks = TokenBucketSampler(lengths, max_tokens, shuffle=False).batches
    outputs: list[list[int] | None] = [None] * len(sources)
    ended = [False] * len(sources)

    def decode_chunk(chunk) -> None:
        src = pad([sources[i] + [EOS_ID] for i in chunk])
        for i, nbest in zip(chunk, decode(src, src != PAD_ID, beam)):
            outputs[i], ended[i] = nbest[0].tokens, nbest[0].finished

    start = time.perf_counter()
    run_batches(decode_chunk, chunks, workers)
    seconds = time.perf_counter() - start
    finished = sum(ended)
    # Output tokens: the best hypotheses' subwords, plus the EOS of those that emitted one.
    out_tokens = sum(len(o) for o in outputs) + finished
    return {"seconds": seconds, "sents_per_s": len(sources) / seconds,
            "tokens_per_s": out_tokens / seconds, "output_tokens": out_tokens,
            "finished": finished, "batches": len(chunks), "outputs": outputs}  # fmt: skip


def load_decoder_model(task, checkpoint: str | None):
    if checkpoint is None:
        return task, None
    model = type(task).load_from_checkpoint(checkpoint, map_location="cpu")
    return model, str(checkpoint)


# ---- reporting ------------------------------------------------------------------------------
def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def fmt(x, digits=1) -> str:
    if x is None:
        return "-"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:,.{digits}f}"


def print_table(rows: list[tuple[str, object, object, int]]) -> None:
    width = max(len(r[0]) for r in rows)
    log(f"{'':{width}}  {'ours':>14}  {'reference':>14}  {'ours/ref':>9}")
    for name, ours, ref, digits in rows:
        r = ratio(ours, ref) if isinstance(ours, (int, float)) else None
        log(f"{name:{width}}  {fmt(ours, digits):>14}  {fmt(ref, digits):>14}  "
            f"{(f'{r:.2f}x' if r is not None else '-'):>9}")  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    for name in ("config", "data", "checkpoint"):
        setattr(args, name, resolve(getattr(args, name)))
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    import lightning  # noqa: F401  (it sets its loggers' levels on import; quiet them after)

    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"lightning(\..*)?$")
    warnings.filterwarnings("ignore", message=".*nested tensors is in prototype")
    warnings.filterwarnings("ignore", message=".*mismatched key_padding_mask")

    task, datamodule, clip = build_from_config(args.config, args.data, args.overrides)
    datamodule.setup("fit")
    decoder_name = type(task.decoder).__name__
    architecture = f"{type(task.encoder).__name__} + {decoder_name}"
    model_name = Path(args.config).stem
    log(
        f"model: {model_name} ({architecture}); torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}"
    )

    ref_module, reference, ref_note = None, None, None
    if args.no_reference:
        ref_note = "reference skipped (--no-reference)"
    elif decoder_name not in REFERENCES:
        ref_note = f"no reference registered for {decoder_name}: ours only"
    else:
        ref_module = importlib.import_module(REFERENCES[decoder_name])
        torch.manual_seed(args.seed)
        reference = ref_module.build_like(task)
    params, ref_params = n_params(task), (n_params(reference) if reference is not None else None)
    log(
        f"parameters: ours {params:,}"
        + (f", reference {ref_params:,}" if ref_params else "")
        + ("" if ref_module is None else f" ({REFERENCES[decoder_name]}: {ref_module.SUMMARY})")
    )
    if ref_note:
        log(ref_note)

    # Ours first (train, then batched decoding), so the high-water mark of RSS after these is
    # ours alone; then the reference's training and the per-sentence decoding.
    log(
        f"training: {args.warmup} warm-up + {args.steps} timed steps each, gradient clip {clip}, "
        f"precision {args.train_precision}"
    )
    ours_train = train_ours(task, datamodule, clip, args)
    log(
        f"  ours: {ours_train['tokens_per_s']:,.0f} real target tok/s, "
        f"{ours_train['s_per_step']:.2f} s/step, loss {ours_train['first_loss']:.3f} -> "
        f"{ours_train['last_loss']:.3f}"
    )

    model, checkpoint = load_decoder_model(task, args.checkpoint)
    model.eval()
    decode_note = (f"trained checkpoint {checkpoint}" if checkpoint else
                   f"NO checkpoint: the model after {args.warmup + args.steps} training steps "
                   "(untrained; output lengths, and so decoding speed, differ from a trained "
                   "model's; pass --checkpoint for the honest figure)")  # fmt: skip
    sources = test_sources(model, datamodule, args.sentences)
    log(f"decoding: beam {args.beam}, {len(sources)} test sentences, {decode_note}")

    def batched(sentences: list[list[int]]) -> dict:
        return decode_all(model.decode, sentences, args.beam, args.decode_tokens, args.workers)

    batched(sources[:2])  # warm-up, untimed
    ours_dec = batched(sources)
    log(
        f"  batched: {ours_dec['batches']} batches of <= {args.decode_tokens} source tokens, "
        f"{ours_dec['seconds']:.2f} s, {ours_dec['sents_per_s']:.1f} sentences/s, "
        f"{ours_dec['output_tokens']:,} output tokens, ended with EOS {ours_dec['finished']}/"
        f"{len(sources)}"
    )
    rss_ours = peak_rss_mb()
    log(f"  peak RSS after ours (train + decode): {rss_ours:,.0f} MB")
    other_precisions = {}
    for precision in args.precisions:
        if precision == "32":
            continue
        with inference_precision("cpu", precision):
            batched(sources[:2])  # warm-up
            run = batched(sources)
        run["same_as_32"] = sum(a == b for a, b in zip(ours_dec["outputs"], run["outputs"]))
        other_precisions[precision] = run
        log(
            f"  in {precision}: {run['seconds']:.2f} s, {run['sents_per_s']:.1f} sentences/s, "
            f"{run['tokens_per_s']:,.0f} output tokens/s; best outputs identical to float32: "
            f"{run['same_as_32']}/{len(sources)}"
        )

    ref_train = None
    if reference is not None:
        ref_train = train_reference(ref_module, reference, task, datamodule, clip, args)
        log(f"  reference training: {ref_train['tokens_per_s']:,.0f} real target tok/s, "
            f"{ref_train['s_per_step']:.2f} s/step, loss {ref_train['first_loss']:.3f} -> "
            f"{ref_train['last_loss']:.3f}; {ref_train['batch_sentences']} sentences/batch in "
            f"random order (ours: {ref_train['ours_batches_per_epoch']} token-bucketed "
            f"batches/epoch; both average {ref_train['mean_batch_tokens']:.0f} real target "
            "tokens per batch)")  # fmt: skip
        del reference

    if ref_module is not None and hasattr(ref_module, "decoding_like"):
        ref_decode, ref_tokens = ref_module.decoding_like(model), args.decode_tokens
        ref_how = f"{REFERENCES[decoder_name]}, same weights and batches"
    else:
        ref_decode, ref_tokens, ref_how = model.decode, None, "same model, batch of 1"
    decode_all(ref_decode, sources[:1], args.beam, ref_tokens, args.workers)  # warm-up, untimed
    ref_dec = decode_all(ref_decode, sources, args.beam, ref_tokens, args.workers)
    same = sum(a == b for a, b in zip(ours_dec["outputs"], ref_dec["outputs"]))
    log(
        f"  reference decoding ({ref_how}): {ref_dec['seconds']:.2f} s, "
        f"{ref_dec['sents_per_s']:.1f} sentences/s; best outputs identical to ours: "
        f"{same}/{len(sources)}"
    )
    peak = peak_rss_mb()

    log("")
    ref_tps = ref_train and ref_train["tokens_per_s"]
    rows = [
        ("parameters", params, ref_params, 0),
        ("train real target tokens/s", ours_train["tokens_per_s"], ref_tps, 1),
        ("train s/step", ours_train["s_per_step"], ref_train and ref_train["s_per_step"], 3),
        (f"beam-{args.beam} sentences/s", ours_dec["sents_per_s"],
         ref_dec["sents_per_s"], 2),
        (f"beam-{args.beam} output tokens/s", ours_dec["tokens_per_s"], ref_dec["tokens_per_s"],
         1),
    ]  # fmt: skip
    for precision, run in other_precisions.items():
        name = f"beam-{args.beam} {{}}, {precision}"
        rows.append((name.format("sentences/s"), run["sents_per_s"], None, 2))
        rows.append((name.format("output tokens/s"), run["tokens_per_s"], None, 1))
    print_table(rows)
    log(
        f"peak RSS: {rss_ours:,.0f} MB after ours (train + batched decode), {peak:,.0f} MB for "
        "the whole process (reference phases included)"
    )
    log(f"decoding model: {decode_note}")

    result = {
        "model": model_name,
        "architecture": architecture,
        "config": args.config,
        "overrides": args.overrides,
        "train_tokens_per_s": ours_train["tokens_per_s"],
        "ref_train_tokens_per_s": ref_tps,
        "train_ratio": ratio(ours_train["tokens_per_s"], ref_tps),
        "beam_sents_per_s": ours_dec["sents_per_s"],
        "ref_beam_sents_per_s": ref_dec["sents_per_s"],
        "beam_ratio": ratio(ours_dec["sents_per_s"], ref_dec["sents_per_s"]),
        "beam_tokens_per_s": ours_dec["tokens_per_s"],
        "ref_beam_tokens_per_s": ref_dec["tokens_per_s"],
        "beam_output_tokens": ours_dec["output_tokens"],
        "beam_identical_outputs": same,
        "beam_finished": ours_dec["finished"],
        "peak_rss_mb": peak,
        **{
            f"beam_{key}_{precision}": run[key]
            for precision, run in other_precisions.items()
            for key in ("sents_per_s", "tokens_per_s", "same_as_32")
        },
        "peak_rss_mb_ours": rss_ours,
        "params": params,
        "ref_params": ref_params,
        "ref_batch_sentences": ref_train and ref_train["batch_sentences"],
        "reference": None if ref_module is None else REFERENCES[decoder_name],
        "ref_decoding": ref_how,
        "steps": args.steps,
        "warmup": args.warmup,
        "sentences": len(sources),
        "beam": args.beam,
        "threads": args.threads,
        "train_precision": args.train_precision,
        "checkpoint": checkpoint,
        "torch": torch.__version__,
    }
    if args.json:
        print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
