"""Parsing data, constrained decoding and the parsing task, on the shared WSJ sample."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections import Counter
from functools import partial
from types import ModuleType

import pytest
import torch
from conftest import REPO, load_script, relabel, subprocess_env, validate_counting_encodings
from nltk import Tree

import seqtasks
from seqtasks.cli.main import SeqtasksCLI
from seqtasks.cli.report_progress import VARIABLE
from seqtasks.data.batch import pad
from seqtasks.data.tokenizer import BOS_ID, EOS_ID
from seqtasks.decoders import BahdanauDecoder, LuongDecoder
from seqtasks.encoders import RNNEncoder
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.parsing.constraint import BracketConstraint
from seqtasks.parsing.data import ParsingData, collate
from seqtasks.parsing.linearisation import delinearise, repair
from seqtasks.parsing.parseval import score_corpus
from seqtasks.parsing.task import ParsingTask
from seqtasks.parsing.trees import read_treebank, read_trees, to_line
from seqtasks.parsing.vocabulary import SPECIALS, ParsingVocabulary, unknown_word_class
from seqtasks.search import SearchSettings, beam_search
from seqtasks.search.hypothesis import max_lengths
from seqtasks.search.single_path import greedy, sample


@pytest.fixture(scope="module")
def data(ptb_dir) -> ParsingData:
    module = ParsingData(str(ptb_dir), max_tokens=1024)
    module.setup("fit")
    return module


@pytest.mark.parametrize(
    "word, expected",
    [
        ("Bankrolling", "<unk-Cap-ing>"),
        ("3.5", "<unk-other-num>"),
        ("AT&T", "<unk-CAPS>"),
        ("semi-annual", "<unk-low-dash-al>"),
        ("fizzled", "<unk-low-ed>"),
    ],
)
def test_unknown_word_classes(word, expected):
    assert unknown_word_class(word) == expected


def test_vocabularies_come_from_the_training_split(data):
    v = data.vocabulary
    assert (len(data.datasets["fit"]), len(data.datasets["validate"])) == (3396, 273)
    assert v.words[:4] == v.tokens[:4] == SPECIALS
    assert (data.src_vocab_size, data.tgt_vocab_size) == (len(v.words), len(v.tokens))
    assert "XX" in v.tokens and "NN" not in v.tokens
    for label in ("S", "NP", "VP", "SBAR", "PRN"):
        assert f"({label}" in v.tokens and f"){label}" in v.tokens
    assert {"the", "Vinken", "<unk-Cap>"} <= set(v.words)  # Vinken is seen twice
    assert v.source.encode_words(["the", "Zyzzyva"]) == [
        v.source.ids["the"],
        v.source.ids["<unk-Cap>"],
    ]
    reverse = ParsingVocabulary(v.words, v.tokens, tags=False, reverse=True)
    assert reverse.source.encode_words(["a", "the"]) == v.source.encode_words(["the", "a"])
    assert ParsingVocabulary.from_dict(v.as_dict()).as_dict() == v.as_dict()


def test_tagged_targets(ptb_dir):
    dev = read_treebank(ptb_dir / "dev.mrg")
    tagged = ParsingVocabulary.build(dev, tags=True, reverse=False, min_count=1)
    assert {"NN", "-LRB-", "''", ","} <= set(tagged.tokens) and "XX" not in tagged.tokens


def test_batches(data):
    batch = next(iter(data.val_dataloader()))
    lengths = batch.src_mask.sum(1)
    assert (batch.src[torch.arange(len(batch)), lengths - 1] == EOS_ID).all()
    assert (batch.tgt_in[:, 0] == BOS_ID).all()
    assert ((batch.tgt_out == EOS_ID).sum(1) == 1).all()
    assert [len(w.split()) + 1 for w in batch.src_text] == lengths.tolist()
    assert batch.tgt_text[0].startswith("(TOP (")


def test_word_dropout_reads_words_as_their_class(data):
    items = [data.datasets["fit"][i] for i in range(40)]
    kept, dropped = collate(items), collate(items, word_dropout=True)
    changed = kept.src != dropped.src
    assert changed.any()
    classes = pad([e.unknown + [EOS_ID] for _, e in items])
    assert (dropped.src[changed] == classes[changed]).all()


def test_missing_data_names_the_preparation_step(tmp_path):
    with pytest.raises(FileNotFoundError, match="data_prep/ptb.py"):
        ParsingData(str(tmp_path))


# ---- constrained decoding: well-formed trees over exactly the input words -------------------
def random_parser(data: ParsingData, decoder_class, seed: int):
    torch.manual_seed(seed)
    encoder = RNNEncoder(data.src_vocab_size, 16, 16, cell="lstm", dropout=0.0)
    decoder = decoder_class(
        data.tgt_vocab_size, 32, embed_dim=8, hidden_size=16, cell="lstm", dropout=0.0
    )
    return encoder.eval(), decoder.eval()


def dev_batch(data: ParsingData, size: int = 24):
    items = [data.datasets["validate"][i] for i in range(size)]
    return collate(items), [e.words.split() for _, e in items]


@pytest.mark.parametrize("search", ["greedy", "beam", "sample"])
@pytest.mark.parametrize("decoder_class", [BahdanauDecoder, LuongDecoder])
def test_constrained_search_gives_trees_over_exactly_the_words(data, search, decoder_class):
    encoder, decoder = random_parser(data, decoder_class, seed=0)
    batch, sentences = dev_batch(data)
    with torch.no_grad():
        memory = encoder(batch.src, batch.src_mask)
    words = memory.lengths - 1
    limit = max_lengths(memory, 4.0, 5)
    constraint = BracketConstraint(data.vocabulary.tokens, words, EOS_ID, len(SPECIALS))
    run = {
        "greedy": partial(greedy, decoder, memory, limit),
        "beam": partial(beam_search, decoder, memory, SearchSettings(4, n_best=4), limit),
        "sample": partial(sample, decoder, memory, limit),
    }[search]
    for sentence, nbest in zip(sentences, run(constraint=constraint), strict=True):
        for hypothesis in nbest:
            tokens = data.vocabulary.target.pieces(hypothesis.tokens)
            assert hypothesis.finished
            assert repair(tokens, len(sentence)) == (tokens, 0)
            tree = delinearise(tokens, sentence)
            assert tree.leaves() == sentence and len(tree) == 1
    if search == "greedy":  # the same random model, unconstrained, writes malformed sequences
        outputs = [data.vocabulary.target.pieces(nbest[0].tokens) for nbest in run()]
        malformed = [repair(t, len(s))[1] > 0 for t, s in zip(outputs, sentences)]
        assert sum(malformed) > len(sentences) // 2


def test_the_shortest_limit_leaves_one_bracket_around_the_words(data):
    encoder, decoder = random_parser(data, LuongDecoder, seed=1)
    batch, sentences = dev_batch(data, 6)
    with torch.no_grad():
        memory = encoder(batch.src, batch.src_mask)
    words = memory.lengths - 1
    constraint = BracketConstraint(data.vocabulary.tokens, words, EOS_ID, len(SPECIALS))
    for sentence, (h,) in zip(sentences, greedy(decoder, memory, words + 3, constraint=constraint)):
        tokens = data.vocabulary.target.pieces(h.tokens)
        assert tokens[1:-1] == ["XX"] * len(sentence) and tokens[0][1:] == tokens[-1][1:]
    with pytest.raises(ValueError, match="room for a bracket"):
        greedy(decoder, memory, words + 2, constraint=constraint)


# ---- the task: trained briefly, checkpointed, loaded back ------------------------------------
TINY = [
    *("--model.init_args.encoder.init_args.embed_dim", "16"),
    *("--model.init_args.encoder.init_args.hidden_size", "16"),
    *("--model.init_args.encoder.init_args.num_layers", "1"),
    *("--model.init_args.decoder.init_args.embed_dim", "8"),
    *("--model.init_args.decoder.init_args.hidden_size", "16"),
    *("--model.init_args.decoder.init_args.num_layers", "1"),
    *("--model.init_args.optimizer.init_args.lr", "0.01"),
    *("--data.init_args.max_tokens", "512"),
]


@pytest.fixture(scope="module")
def checkpoint(ptb_dir, tmp_path_factory):
    """configs/parsing/lstm_attention.yaml shrunk, trained for 3 steps, saved as the CLI does."""
    root = tmp_path_factory.mktemp("parser")
    cli = SeqtasksCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_callback=None,
        run=False,
        args=[
            *("--config", str(REPO / "configs/parsing/lstm_attention.yaml")),
            *("--data.init_args.data_dir", str(ptb_dir), *TINY),
            *("--trainer.max_steps", "3", "--trainer.limit_val_batches", "2"),
            *("--trainer.logger", "false", "--trainer.callbacks", "[]"),
            *("--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(root)),
        ],
    )
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    metrics = cli.trainer.callback_metrics
    assert {"val/f1", "val/malformed", "val/complete_match"} <= set(metrics)
    assert float(metrics["val/malformed"]) == 0.0  # constrained decoding
    path = root / "parser.ckpt"
    cli.trainer.save_checkpoint(path)
    return path


def test_checkpoint_carries_the_vocabularies_and_parses(checkpoint, ptb_dir):
    parser = seqtasks.load(checkpoint)
    gold = read_treebank(ptb_dir / "dev.mrg")[:5]
    sentences = [g.leaves() for g in gold] + [[]]
    for beam in (1, 3):
        parses = parser.parse(
            sentences, beam=beam, tags=[[t for _, t in g.pos()] for g in gold] + [[]]
        )
        for parse, words in zip(parses, sentences, strict=True):
            assert parse.tree.label() == "TOP" and parse.tree.leaves() == words
            assert parse.repairs == 0
        assert parses[0].tree.pos() == gold[0].pos()  # the gold tags were put on
        assert parses[-1].tree == Tree("TOP", [])


def test_validation_scores_the_trees_parse_writes(checkpoint, ptb_dir, monkeypatch):
    """`validate` on the dev split (greedy, as `val_beam`) scores what `parse` writes for the
    same words, with the model's own tags; the encoder runs once per batch (the loss and
    the search share its output)."""
    parser = seqtasks.load(checkpoint)
    data = ParsingData(str(ptb_dir), max_tokens=512)
    metrics, encodings = validate_counting_encodings(parser.task, data, monkeypatch)
    assert encodings == len(data.val_dataloader())

    golds = read_treebank(ptb_dir / "dev.mrg")
    parses = parser.parse([g.leaves() for g in golds], beam=1)
    scores = score_corpus(golds, [p.tree for p in parses]).all
    assert metrics["val/f1"] == pytest.approx(scores.f1)
    assert metrics["val/complete_match"] == pytest.approx(scores.complete_match)
    assert metrics["val/tagging_accuracy"] == pytest.approx(scores.tagging_accuracy)
    right = sum(p.tree.pos() == g.pos() for p, g in zip(parses, golds))
    assert right < len(golds), "3 training steps cannot tag every sentence right"


def test_parallel_workers_parse_like_one(checkpoint, ptb_dir, monkeypatch):
    """Batches shared among worker threads give the same trees; every worker decodes without
    gradients and under the caller's autocast; torch's thread count is restored."""
    parser = seqtasks.load(checkpoint)
    sentences = [g.leaves() for g in read_treebank(ptb_dir / "dev.mrg")[:30]]
    alone = parser.parse(sentences, beam=2, max_tokens=100, workers=1)
    seen = []
    from seqtasks.tasks import model

    def recording_search(*args, **kwargs):
        seen.append((torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")))
        return search(*args, **kwargs)

    search = model.search
    monkeypatch.setattr(model, "search", recording_search)
    threads = torch.get_num_threads()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        parser.parse(sentences, beam=2, max_tokens=100, workers=3)
    assert len(seen) > 3 and set(seen) == {(False, True)}
    together = parser.parse(sentences, beam=2, max_tokens=100, workers=3)
    assert [p.tree for p in together] == [p.tree for p in alone]
    assert torch.get_num_threads() == threads


def test_unconstrained_outputs_are_repaired(checkpoint, ptb_dir):
    parser = seqtasks.load(checkpoint)
    parser.task.constrained = False
    sentences = [g.leaves() for g in read_treebank(ptb_dir / "dev.mrg")[:20]]
    parses = parser.parse(sentences, beam=1)
    assert [p.tree.leaves() for p in parses] == sentences
    assert any(p.repairs > 0 for p in parses), "3 training steps leave malformed output"


def test_checkpoints_of_another_task_are_rejected(checkpoint, tmp_path):
    stored = torch.load(checkpoint, map_location="cpu", weights_only=True)  # plain data only
    relabel(stored, "translation")
    other = tmp_path / "other.ckpt"
    torch.save(stored, other)
    with pytest.raises(ValueError, match="not a parsing checkpoint"):
        ParsingTask.load_from_checkpoint(other)
    with pytest.raises(CheckpointError, match="is a translation checkpoint, not a parsing one"):
        seqtasks.load(other, "cpu", task="parsing")


# ---- the apps, in process (one run as a script) ---------------------------------------------
@pytest.fixture(scope="module")
def apps() -> dict[str, ModuleType]:
    return {name: load_script(f"apps/{name}.py") for name in ("parse", "evaluate")}


@pytest.fixture
def call(apps, monkeypatch, capsys):
    """call(app, *args, stdin="") -> (exit status, stdout, stderr) of apps/<app>.py."""

    def run(app: str, *args: str, stdin: str = "") -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        status = apps[app].main(list(args))
        out, err = capsys.readouterr()
        return status, out, err

    return run


@pytest.mark.slow
def test_parse_script_on_raw_text(checkpoint):
    text = 'Mr. Vinken (61) said "yes." He left!\n\nIt rained.\n'
    result = subprocess.run(
        [sys.executable, "apps/parse.py", "--checkpoint", str(checkpoint)],
        input=text,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=subprocess_env(),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    trees = [read_trees(line)[0] for line in result.stdout.splitlines()]
    assert [t.leaves() for t in trees] == [
        ["Mr.", "Vinken", "-LRB-", "61", "-RRB-", "said", "``", "yes", ".", "''"],
        ["He", "left", "!"],
        ["It", "rained", "."],
    ]


@pytest.mark.slow
def test_parse_pretokenized_keeps_lines_through_empty_and_long_sentences(checkpoint, call):
    long = " ".join(f"w{i}" for i in range(300))
    lines = ["The ( dog ) barks .", "", long, "x " * 360]
    status, out, err = call(
        *("parse", "--checkpoint", str(checkpoint), "--pretokenized", "--beam", "3"),
        *("--max-words", "300"),
        stdin="\n".join(lines) + "\n",
    )
    assert status == 0
    out = out.split("\n")[:-1]
    assert len(out) == 4 and out[1] == out[3] == ""
    assert read_trees(out[0])[0].leaves() == ["The", "-LRB-", "dog", "-RRB-", "barks", "."]
    assert len(read_trees(out[2])[0].leaves()) == 300
    assert "sentence 2 is empty" in err
    assert "sentence 4 has 360 tokens, more than --max-words 300" in err


@pytest.mark.slow
@pytest.mark.parametrize("form, mark", [("pretty", "TOP"), ("svg", "<svg")])
def test_parse_formats(checkpoint, call, form, mark):
    status, out, _ = call(
        "parse", "--checkpoint", str(checkpoint), "--format", form, stdin="It works."
    )
    assert status == 0 and mark in out and "works" in out


PUNCTUATION_TAGS = {",", ":", "``", "''", "."}  # COLLINS.prm's DELETE_LABEL, roots and traces aside


def labelled_spans(tree: Tree, deleted: set[int]) -> Counter:
    """Brackets (label, first, last + 1) of every constituent above the preterminals but the
    TOP root, over the words left once the word positions in `deleted` are gone: computed from
    nltk's tree positions, not the way `seqtasks.parsing.parseval` walks the tree."""
    leaves = tree.treepositions("leaves")
    kept = [i for i in range(len(leaves)) if i not in deleted]
    rank = {i: r for r, i in enumerate(kept)}
    spans: Counter = Counter()
    for position in tree.treepositions():
        node = tree[position]
        if not isinstance(node, Tree) or node.height() <= 2 or position == ():
            continue
        under = [
            rank[i]
            for i, leaf in enumerate(leaves)
            if leaf[: len(position)] == position and i in rank
        ]
        if under:
            label = "ADVP" if node.label() == "PRT" else node.label()
            spans[label, min(under), max(under) + 1] += 1
    return spans


@pytest.mark.slow
def test_evaluate_a_checkpoint_then_its_trees(checkpoint, call, ptb_dir, tmp_path):
    """The checkpoint's trees, scored by the app, against brackets counted another way."""
    pred = tmp_path / "pred.mrg"
    common = ("evaluate", "parsing", "--gold", str(ptb_dir / "dev.mrg"), "--json")
    status, out, _ = call(
        *common, "--checkpoint", str(checkpoint), "--beam", "2", "--output", str(pred)
    )
    assert status == 0
    assert "Bracketing FMeasure" in out and "Malformed output" in out
    report = json.loads(out.splitlines()[-1])
    assert (report["sentences"], report["errors"], report["malformed"]) == (273, 0, 0.0)
    assert sum(b["sentences"] for b in report["by_length"]) == 273

    golds, preds = read_treebank(ptb_dir / "dev.mrg"), read_treebank(pred)
    matched = gold = test = words = right_tags = 0
    for g, p in zip(golds, preds, strict=True):
        assert p.leaves() == g.leaves()
        deleted = {i for i, (_, tag) in enumerate(g.pos()) if tag in PUNCTUATION_TAGS}
        g_spans, p_spans = labelled_spans(g, deleted), labelled_spans(p, deleted)
        matched += sum((g_spans & p_spans).values())
        gold, test = gold + sum(g_spans.values()), test + sum(p_spans.values())
        kept = [(a, b) for i, (a, b) in enumerate(zip(g.pos(), p.pos())) if i not in deleted]
        words += len(kept)
        right_tags += sum(a[1] == b[1] for a, b in kept)
    recall, precision = 100 * matched / gold, 100 * matched / test
    assert (report["matched"], report["gold"], report["test"]) == (matched, gold, test)
    assert gold == 4980  # the dev split's brackets, as the real EVALB counts them
    f1 = 2 * recall * precision / (recall + precision)
    assert report["f1"] == pytest.approx(f1, abs=1e-6)  # JSON keeps 6 decimals
    # lstm_attention.yaml writes POS tags: the report says so and scores the model's own
    # (3 training steps cannot tag every word right; the gold tags would score 100).
    assert report["preterminals"] == "tags"
    assert report["tagging_accuracy"] == pytest.approx(100 * right_tags / words, abs=1e-6)
    assert right_tags < words

    status, out, _ = call(*common, "--pred", str(pred))
    assert status == 0
    assert json.loads(out.splitlines()[-1])["f1"] == pytest.approx(report["f1"])


@pytest.mark.slow
def test_evaluate_says_how_far_it_has_got_on_stderr_and_keeps_stdout_the_report(
    checkpoint, call, ptb_dir, tmp_path, monkeypatch
):
    """Loading, parsing the gold words (how many sentences, then how many are done and how
    fast) and scoring, in order, on stderr; stdout the same report whether progress lines came
    or not, ending with the JSON line; a file of trees is only scored."""

    def progress(err: str) -> list[str]:
        prefix = "evaluate parsing: "
        return [line.removeprefix(prefix) for line in err.splitlines() if line.startswith(prefix)]

    pred = tmp_path / "pred.mrg"
    common = ("evaluate", "parsing", "--gold", str(ptb_dir / "dev.mrg"), "--json")
    model = ("--checkpoint", str(checkpoint), "--beam", "2", "--output", str(pred))
    monkeypatch.setenv(VARIABLE, "0")  # a line at every batch
    status, out, err = call(*common, *model)
    assert status == 0, err
    said = progress(err)
    assert said[0] == f"loading {checkpoint}" and said[1].startswith("done in ")
    assert said[2] == f"decoding 273 sentences with {checkpoint} (beam 2)"
    assert said[-3].startswith("done, 273 sentences in ")
    assert said[-2] == "scoring 273 trees" and said[-1].startswith("done in ")
    counted = r"(\d+)/273 sentences \(\d+ %\)  elapsed \S+  eta \S+  [\d,.]+ sentences/s"
    done = [int(re.fullmatch(counted, line).group(1)) for line in said[3:-3]]
    assert len(done) > 1 and done == sorted(done) and done[-1] == 273

    monkeypatch.setenv(VARIABLE, "600")  # no line between a stage's start and its end
    status, quiet, err = call(*common, *model)
    assert status == 0 and len(progress(err)) == 6 and quiet == out
    assert not progress(out) and json.loads(out.splitlines()[-1])["sentences"] == 273
    status, out, err = call(*common, "--pred", str(pred))
    assert status == 0 and progress(err)[0] == "scoring 273 trees" and len(progress(err)) == 2


@pytest.mark.slow
def test_evaluate_reads_what_parse_writes_a_sentence_not_parsed_included(
    checkpoint, call, ptb_dir, tmp_path
):
    """`seqtasks parse` writes an empty line for a sentence it does not parse (over
    --max-words); `evaluate parsing --pred` reads that file aligned with the gold trees and
    counts that sentence as EVALB counts one it cannot score: an error sentence, out of the
    brackets. The rest score as the trees do on their own."""
    golds = read_treebank(ptb_dir / "dev.mrg")[:6]
    gold = tmp_path / "gold.mrg"
    gold.write_text("".join(to_line(t) + "\n" for t in golds))
    words = [" ".join(t.leaves()) for t in golds]
    longest = max(range(len(words)), key=lambda i: len(golds[i].leaves()))
    limit = str(len(golds[longest].leaves()) - 1)
    status, out, _ = call(
        *("parse", "--checkpoint", str(checkpoint), "--pretokenized", "--beam", "2"),
        *("--max-words", limit),
        stdin="\n".join(words) + "\n",
    )
    assert status == 0 and out.split("\n")[longest] == ""
    pred = tmp_path / "pred.mrg"
    pred.write_text(out)
    status, said, _ = call(
        "evaluate", "parsing", "--gold", str(gold), "--pred", str(pred), "--json"
    )
    assert status == 0, said
    report = json.loads(said.splitlines()[-1])
    assert (report["sentences"], report["errors"], report["not_parsed"]) == (6, 1, 1)
    assert "1 sentences not parsed (empty lines): error sentences" in said
    kept = [i for i in range(6) if i != longest]
    parsed = tmp_path / "parsed.mrg"
    parsed.write_text("".join(out.split("\n")[i] + "\n" for i in kept))
    alone = tmp_path / "alone.mrg"
    alone.write_text("".join(to_line(golds[i]) + "\n" for i in kept))
    status, said, _ = call("evaluate", "parsing", "--gold", str(alone), "--pred", str(parsed),
                           "--json")  # fmt: skip
    assert json.loads(said.splitlines()[-1])["f1"] == pytest.approx(report["f1"])
    empty = tmp_path / "empty.mrg"
    empty.write_text("")
    status, _, err = call("evaluate", "parsing", "--gold", str(empty), "--pred", str(pred))
    assert (
        status == 2 and err == f"error: --gold {empty} holds no trees: nothing to score against\n"
    )


def test_evaluate_scores_xx_trees_and_says_so(call, ptb_dir, tmp_path):
    """Vinyals et al.'s output, the gold trees with XX preterminals: F1 100 (punctuation
    decided by the gold tags), and the report says XX and has no tagging accuracy."""
    golds = read_treebank(ptb_dir / "dev.mrg")
    for tree in golds:
        for position in tree.treepositions("leaves"):
            tree[position[:-1]].set_label("XX")
    pred = tmp_path / "xx.mrg"
    pred.write_text("".join(to_line(t) + "\n" for t in golds))
    status, out, _ = call(
        "evaluate", "parsing", "--gold", str(ptb_dir / "dev.mrg"), "--pred", str(pred), "--json"
    )
    assert status == 0
    report = json.loads(out.splitlines()[-1])
    assert (report["f1"], report["errors"], report["preterminals"]) == (100.0, 0, "XX")
    assert report["tagging_accuracy"] is None
    assert "Tagging accuracy          =    n/a" in out and "Preterminals written = XX" in out


@pytest.mark.slow
def test_bad_inputs_get_clear_messages(checkpoint, call, ptb_dir, tmp_path):
    short = tmp_path / "short.mrg"
    short.write_text("(TOP (S (NN a)))\n")
    broken = tmp_path / "broken.mrg"
    broken.write_text("(TOP (S (NN a)))\n(TOP (S (NN b))\n")
    gold = str(ptb_dir / "dev.mrg")
    for pred, message in [
        (short, f"{gold} has 273 trees but {short} has 1"),
        (broken, f"{broken}: tree 2 (line 2): unbalanced brackets"),
    ]:
        status, _, err = call("evaluate", "parsing", "--gold", gold, "--pred", str(pred))
        assert status == 2 and message in err
    stored = torch.load(checkpoint, map_location="cpu", weights_only=True)
    relabel(stored, "translation")
    other = tmp_path / "translation.ckpt"
    torch.save(stored, other)
    status, _, err = call("parse", "--checkpoint", str(other), stdin="It works.\n")
    assert status == 2 and "is a translation checkpoint, not a parsing one" in err
