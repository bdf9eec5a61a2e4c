"""Model folders and checkpoints edited by hand, with every size and sum made to match again,
are checked as a checkpoint is: the task a folder declares against its model and its files,
each setting through its part's own validation, each tokeniser or vocabulary file parsed as what
its name says. Each is refused in one line naming the folder (or file) by every command, by
`seqtasks export` (which writes nothing) and by `seqtasks.load` (a CheckpointError)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from test_model_folders import damaged_copy, exported, family_checkpoints, with_config

import seqtasks
from seqtasks.io.checkpoint_files import CheckpointError
from seqtasks.model_files.identity import IDENTITY_KEY, fingerprint


@pytest.fixture(scope="module")
def folders(toy_tokenizers, tmp_path_factory) -> dict[str, Path]:
    checkpoints = family_checkpoints(tmp_path_factory.mktemp("checkpoints"), toy_tokenizers)
    del checkpoints["soft"], checkpoints["hard"]
    return exported(checkpoints, tmp_path_factory.mktemp("folders"))


def forged(name: str, data: bytes):
    """Replace the file `name` by `data`, with its size and SHA-256 in config.json, and the
    sum of the entry it holds in the identity record, made to match: only reading the file as
    what it says it is can tell."""

    def forge(folder: Path) -> None:
        (folder / name).write_bytes(data)
        config = json.loads((folder / "config.json").read_text())
        sha = hashlib.sha256(data).hexdigest()
        config["files"][name].update(size=len(data), sha256=sha)
        try:  # the fingerprint the file would have, where its kind and size can be read
            value = json.loads(data) if name.endswith(".json") else data
            print_ = vars(fingerprint(value))
        except ValueError:
            print_ = {"sha256": sha}
        config["identity"]["fingerprints"][config["files"][name]["entry"]].update(print_)
        (folder / "config.json").write_text(json.dumps(config))

    return forge


def model_args(change):
    return with_config(lambda config: change(config["model"]["init_args"]))


EDITED = {  # case -> (folder, command, what is done to a copy, the one line after "error: ")
    "relabelled as parsing": (
        "rnn",
        "parse",
        with_config(lambda c: c["identity"].update(task="parsing")),
        "{f}: it declares a parsing model, which keeps vocabulary, but it holds source "
        "tokenizer, target tokenizer; the model folder was edited or damaged",
    ),
    "its class relabelled": (
        "rnn",
        "translate",
        with_config(lambda c: c["model"].update(class_path="seqtasks.parsing.task.ParsingTask")),
        "{f}: it declares a translation model, but its model is seqtasks.parsing.task."
        "ParsingTask, which is no TranslationTask; the model folder was edited or damaged",
    ),
    "heads that do not divide the width": (
        "transformer",
        "translate",
        model_args(lambda m: m["encoder"]["init_args"].update(num_heads=3)),
        "{f}: its model cannot be built: encoder TransformerEncoder: d_model=16 is not "
        "divisible by num_heads=3",
    ),
    "a dropout out of range": (
        "rnn",
        "translate",
        model_args(lambda m: m["encoder"]["init_args"].update(dropout=1.5)),
        "{f}: its model cannot be built: encoder RNNEncoder: dropout rate must be in [0, 1), "
        "got 1.5",
    ),
    "no decoder": (
        "rnn",
        "translate",
        model_args(lambda m: m.pop("decoder")),
        "{f}: its model lacks decoder, which TranslationTask needs; the model folder was "
        "edited or damaged",
    ),
    "a tokeniser of four bytes": (
        "rnn",
        "translate",
        forged("source.spm", b"abcd"),
        "{f}/source.spm is not a sentencepiece model (it does not parse): the file is damaged "
        "or replaced",
    ),
    "a tokeniser of plain text": (
        "rnn",
        "translate",
        forged("target.spm", b"the quick brown fox\n"),
        "{f}/target.spm is not a sentencepiece model (it does not parse): the file is damaged "
        "or replaced",
    ),
    "an empty tokeniser": (
        "rnn",
        "translate",
        forged("source.spm", b""),
        "{f}/source.spm is not a sentencepiece model (it is empty): the file is damaged or "
        "replaced",
    ),
    "a vocabulary that is not JSON": (
        "parsing",
        "parse",
        forged("vocabulary.json", b"{'words': [1"),
        "{f}/vocabulary.json is not valid JSON (line 1, column 2: Expecting property name "
        "enclosed in double quotes): the file is damaged",
    ),
    "a vocabulary of another shape": (
        "parsing",
        "parse",
        forged("vocabulary.json", b"[1, 2, 3]"),
        "{f}: its vocabularies cannot be read (",
    ),
    "an entry named by no name": (
        "rnn",
        "translate",
        with_config(lambda c: c["files"]["source.spm"].update(entry=["src_tokenizer"])),
        "{f}/config.json lists source.spm as entry ['src_tokenizer'], which a model folder "
        "keeps in no file: the file was edited",
    ),
    "entries that are no section": (
        "rnn",
        "translate",
        with_config(lambda c: c.update(entries=[1, 2])),
        "{f}/config.json: its 'entries' is no section: the file is damaged",
    ),
    "a tokeniser listed as the vocabulary": (
        "rnn",
        "translate",
        with_config(lambda c: c["files"]["source.spm"].update(entry="vocabulary")),
        "{f}/config.json lists source.spm as the vocabulary, which a model folder keeps in "
        "vocabulary.json: the file was edited",
    ),
}


@pytest.mark.parametrize("case", sorted(EDITED))
def test_an_edited_folder_is_refused_in_one_line_by_every_caller(
    case, folders, run_command, tmp_path
):
    name, command, change, message = EDITED[case]
    folder = damaged_copy(folders[name], tmp_path, change)
    said = "error: " + message.format(f=folder)
    status, out, err = run_command(command, "--checkpoint", str(folder), stdin="Ein Hund .\n")
    assert (status, out) == (2, "") and err.count("\n") == 1 and err.startswith(said), err

    out_folder = tmp_path / "exported"
    status, out, err = run_command("export", str(folder), "--to", "folder", str(out_folder))
    assert status == 2 and err.startswith(said) and err.count("\n") == 1, err
    assert not out_folder.exists()  # nothing copied on

    with pytest.raises(CheckpointError) as refused:
        seqtasks.load(folder, "cpu")
    assert ("error: " + str(refused.value)).startswith(said)


@pytest.mark.parametrize(
    "data, why",
    [
        (b"\x08\x01", "its tokenisers cannot be read (checkpoint source tokeniser is not a "
                      "sentencepiece model (INTERNAL: unk is not defined.))"),
        (b"abcd", "its source tokenizer is not a sentencepiece model (it ends inside a field): "
                  "the file is damaged or was altered"),
        (b"\x0e", "its source tokenizer is not a sentencepiece model (protocol buffer wire "
                  "type 6, which no sentencepiece model has): the file is damaged or was "
                  "altered"),
    ],
)  # fmt: skip
def test_a_checkpoint_whose_tokeniser_was_forged_is_refused_in_one_line(
    data, why, folders, toy_tokenizers, run_command, tmp_path
):
    """A checkpoint's stored tokeniser replaced, with its record's fingerprint made to match:
    the fingerprint's own parser and the tokeniser's loading both name what is wrong."""
    from test_model_folders import RNN, translator

    decoder = {"class_path": "seqtasks.decoders.BahdanauDecoder", "init_args": RNN["init_args"]}
    path = translator(tmp_path / "rnn.ckpt", toy_tokenizers, encoder=RNN, decoder=decoder)
    checkpoint = torch.load(path, weights_only=False)
    checkpoint["seqtasks"]["src_tokenizer"] = data
    try:
        forged_print = vars(fingerprint(data))
    except ValueError:  # the parser cannot read it: the record keeps only the sum right
        forged_print = {"sha256": hashlib.sha256(data).hexdigest()}
    checkpoint[IDENTITY_KEY]["fingerprints"]["src_tokenizer"].update(forged_print)
    torch.save(checkpoint, path)
    status, out, err = run_command("translate", "--checkpoint", str(path), stdin="Ein Hund .\n")
    assert (status, out, err) == (2, "", f"error: {path}: {why}\n")
    with pytest.raises(CheckpointError, match="sentencepiece model"):
        seqtasks.load(path, "cpu")
