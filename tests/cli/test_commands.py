"""The `seqtasks` command: one usage listing every subcommand, each command's options, an unknown
command refused with the list, help that imports nothing heavy, and search options that leave
the checkpoint's own settings alone unless given."""

from __future__ import annotations

import importlib
import json
import re
from types import SimpleNamespace

import pytest
from conftest import REPO, fresh_python

import seqtasks
from seqtasks.cli.commands import main

FIXTURES = REPO / "tests" / "fixtures" / "pre_redesign"
NAMES = ["fit", "validate", "test", "predict", "translate", "parse", "caption", "evaluate"]
NAMES += ["average", "serve", "export"]
HEAVY = ("torch", "lightning", "numpy", "matplotlib", "PIL", "nltk", "sacrebleu", "litserve")


def help_of(argv: list[str], capsys) -> str:
    """What `seqtasks ARGV` prints for help (exit status 0)."""
    try:
        status = main(argv)
    except SystemExit as exit:  # argparse's --help
        status = exit.code
    assert status in (0, None)
    return capsys.readouterr().out


def listed(text: str) -> list[str]:
    """The command names a usage lists, in order (the first word of each indented line)."""
    words = [line.split()[0] for line in text.splitlines() if line.startswith("  ")]
    return [word for word in words if not word.startswith("-")]


@pytest.mark.parametrize("argv", [["--help"], ["-h"], []])
def test_the_usage_lists_every_command_with_what_it_does(argv, capsys):
    text = help_of(argv, capsys)
    assert text.startswith("usage: seqtasks COMMAND")
    assert listed(text) == NAMES
    assert "--version" in text
    for line in text.splitlines():
        if line.startswith("  ") and line.split()[0] in NAMES:
            assert len(line.split()) > 2, f"no description: {line!r}"


def test_version(capsys):
    assert help_of(["--version"], capsys) == f"seqtasks {seqtasks.__version__}\n"


def test_the_version_is_one_and_the_changelog_says_what_it_changed():
    """pyproject.toml, `seqtasks.__version__` (what model files record) and the newest entry of
    CHANGELOG.md name one version: a change users notice is said where they look."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["version"] == seqtasks.__version__
    changelog = (REPO / "CHANGELOG.md").read_text()
    newest = re.search(r"^## (\S+)", changelog, re.M)
    assert newest is not None and newest[1] == seqtasks.__version__


@pytest.mark.parametrize("name", ["x", "trainn", "--verbose"])
def test_an_unknown_command_is_refused_with_the_list(name, capsys):
    assert main([name]) == 2
    captured = capsys.readouterr()
    kind = "option" if name.startswith("-") else "command"
    assert captured.out == "" and f"error: unknown {kind} '{name}'" in captured.err
    assert listed(captured.err) == NAMES


@pytest.mark.parametrize(
    "argv, options",
    [
        (["translate"], ["--checkpoint", "--input", "--output", "--beam", "--n-best", "--stop"]),
        (["translate"], ["--max-length", "--max-tokens", "--attention-plots", "--device"]),
        (["parse"], ["--checkpoint", "--pretokenized", "--format", "--beam", "--max-words"]),
        (["caption"], ["inputs", "--checkpoint", "--beam", "--out", "--attention-maps"]),
        (["evaluate"], ["translation", "parsing", "captioning"]),
        (["evaluate", "translation"], ["--src", "--ref", "--beam", "--ensemble", "--json"]),
        (["evaluate", "captioning"], ["--source", "--split", "--beam", "--nearest-neighbour"]),
        (["average"], ["checkpoints", "--out", "--last"]),
        (
            ["serve"],
            [
                "MODEL",
                "--port",
                "--open",
                "--max-attention",
                "--host",
                "--max-batch-size",
                "--batch-timeout",
            ],
        ),
        (["export"], ["MODEL", "OUT", "--to", "--quantization", "--force"]),
    ],
)
def test_each_command_has_its_help(argv, options, capsys):
    text = help_of([*argv, "--help"], capsys)
    assert text.startswith(f"usage: seqtasks {argv[0]}")
    for option in options:
        assert option in text
    if "--beam" in options:
        assert "--beam BEAM" in text and "default: the model's own" in text


def test_help_imports_nothing_heavy():
    """Every command's --help, in one fresh process: torch, Lightning and the like are what make
    a command slow to start, so none may be imported before a command runs."""
    commands = [
        ["--help"],
        *([name, "--help"] for name in NAMES[4:]),
        ["evaluate", "parsing", "-h"],
    ]
    script = f"""
import json, sys
from seqtasks.cli.commands import main
for argv in {commands!r}:
    try:
        main(argv)
    except SystemExit:
        pass
print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))
"""
    result = fresh_python(script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == []


def test_argument_errors_are_said_at_once_without_importing_anything_heavy():
    """A command given no arguments, a bare `seqtasks fit`, an option or subcommand mistyped
    (also where a required option is missing because it was mistyped), a checkpoint that is
    not there, or a checkpoint or folder of another task: each says what is wrong (and "did
    you mean" what is near) at once, importing no torch: argparse passes the "auto" defaults
    through their types too, which used to import it."""
    translation = FIXTURES / "translation_transformer.ckpt"
    commands = [
        ["translate"],
        ["parse", "--checkpoint"],
        ["caption"],
        ["evaluate", "translation"],
        ["evaluate", "parsing"],
        ["evaluate", "captioning"],
        ["evaluate", "translatoin"],
        ["translate", "--checkpoint", str(translation), "--beem", "3"],
        ["translate", "--chekpoint", str(translation)],
        ["evaluate", "translation", "--chekpoint", str(translation)],
        ["translate", "--checkpoint", str(translation.parent / "translation_transformer.ckp")],
        ["parse", "--checkpoint", str(translation)],
        ["evaluate", "parsing", "--checkpoint", str(translation), "--gold", str(translation)],
        ["export", str(translation), "out", "--to", "folder", "--quantization", "int8"],
        ["fit"],
        ["transalte"],
    ]
    script = f"""
import json, sys
from seqtasks.cli.commands import main
errors = []
for argv in {commands!r}:
    try:
        status = main(argv)
    except SystemExit as exit:
        status = exit.code
    errors.append(status)
print(json.dumps([errors, [name for name in {HEAVY!r} if name in sys.modules]]))
"""
    result = fresh_python(script)
    statuses, heavy = json.loads(result.stdout.splitlines()[-1])
    assert statuses == [2] * len(commands) and heavy == [], result.stderr[-3000:]
    said = result.stderr
    assert "the following arguments are required: --checkpoint" in said
    assert "invalid choice: 'translatoin'" in said and "(did you mean translation?)" in said
    assert "unrecognized arguments: --beem 3 (did you mean --beam?)" in said
    assert "translate: error: unrecognized arguments: --chekpoint " in said
    assert f"translation: error: unrecognized arguments: --chekpoint {translation} (did" in said
    assert said.count("(did you mean --checkpoint?)") == 2
    assert (
        f"no such checkpoint or model folder: {translation.parent}/translation_transformer.ckp "
        f"(did you mean {translation}?)"
    ) in said
    assert said.count(f"error: {translation} is a translation checkpoint, not a parsing one") == 2
    assert "export: error: argument --quantization: is for --to ctranslate2" in said
    assert "error: seqtasks fit needs a config: --config F.yaml (configs/ holds one per" in said
    assert "error: unknown command 'transalte' (did you mean translate?)" in said


def parsers_of(name: str, monkeypatch) -> list:
    """The argument parsers `seqtasks NAME` builds (its subcommands' among them)."""
    from seqtasks.cli.arguments import CommandParser

    built = []

    def caught(self, *args, **kwargs):
        built.append(self)
        raise SystemExit(0)

    with monkeypatch.context() as patch:
        patch.setattr(CommandParser, "parse_args", caught)
        try:
            main([name])
        except SystemExit:
            pass
    return built


@pytest.mark.parametrize("name", NAMES[4:])
def test_every_option_and_subcommand_has_a_help_line(name, monkeypatch):
    import argparse

    missing = []

    def walk(parser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {choice.dest: choice.help for choice in action._choices_actions}
                missing.extend(f"{parser.prog} {c}" for c in action.choices if not helps.get(c))
                for sub in action.choices.values():
                    walk(sub)
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{parser.prog} {'/'.join(action.option_strings) or action.dest}")

    (parser,) = parsers_of(name, monkeypatch)
    walk(parser)
    assert missing == []


@pytest.mark.parametrize("name", NAMES[4:])
def test_every_command_takes_output_as_translate_spells_it(name, monkeypatch):
    """`--out` (caption, average) is also `--output` (translate, evaluate): a user need not
    remember which command spells it which way."""
    import argparse

    def options(parser) -> list[list[str]]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found += [o for sub in action.choices.values() for o in options(sub)]
            found.append(action.option_strings)
        return found

    (parser,) = parsers_of(name, monkeypatch)
    assert all("--output" in strings for strings in options(parser) if "--out" in strings)


def test_the_console_script_is_the_command():
    """pyproject.toml's one script names this `main` (tomllib is not in Python 3.10)."""
    scripts = (REPO / "pyproject.toml").read_text().split("[project.scripts]\n")[1]
    name, target = scripts.split("\n\n")[0].split(" = ")
    module, function = target.strip('"').split(":")
    assert name == "seqtasks" and getattr(importlib.import_module(module), function) is main


class Recorder:
    """A stand-in for what `seqtasks.load` returns: records what the command asks of it."""

    gives_attention = False

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []

    def search_settings(self, **given):
        self.calls.append(("search_settings", given))
        return SimpleNamespace(n_best=given.get("n_best", 1), beam=given.get("beam", 5))

    def translate(self, lines, **options):
        self.calls.append(("translate", options))
        return [SimpleNamespace(text=line, score=0.0, alternatives=[]) for line in lines]


@pytest.mark.parametrize(
    "options, search",
    [
        ([], {}),
        (["--beam", "4", "--stop", "heuristic"], {"beam": 4, "stop": "heuristic"}),
        (["--n-best", "1", "--max-length", "7"], {"n_best": 1, "max_length": 7}),
    ],
)
def test_search_options_reach_the_api_only_when_given(
    options, search, run_command, monkeypatch, tmp_path
):
    """None is the checkpoint's own setting: an option left out is not passed, so the model's
    `test_beam`, `beam_stop` and length limit apply."""
    model = Recorder()
    monkeypatch.setattr(seqtasks, "load", lambda *args, **kwargs: model)
    (tmp_path / "x.ckpt").touch()  # a path that is there (the load is the recorder)
    status, out, _ = run_command(
        "translate", "--checkpoint", str(tmp_path / "x.ckpt"), *options, stdin="a\nb\n"
    )
    assert (status, out) == (0, "a\nb\n")
    assert model.calls == [
        ("search_settings", search),
        ("translate", {"max_tokens": "auto", "attention": False, **search}),
    ]


def test_an_n_best_over_the_models_beam_is_an_error_before_any_work(run_command):
    """With --n-best alone, the checkpoint's beam bounds it: the API's refusal is one error
    line; with both options the argument parser refuses them (test_bad_input)."""
    checkpoint = str(FIXTURES / "translation_transformer.ckpt")
    status, out, err = run_command(
        "translate", "--checkpoint", checkpoint, "--n-best", "99", stdin="Ein Hund.\n"
    )
    assert (status, out) == (2, "")
    assert err.startswith("error: n_best=99 cannot exceed beam=") and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["translation", "--hyp", "F", "--src", "F", "--ref", "F", "--output", "o.txt"],
            "argument --hyp: scores a file of translations; --output, --ensemble and "
            "--length-plot are for --checkpoint",
        ),
        (
            ["captioning", "--pred", "p.jsonl", "--source", "D", "--nearest-neighbour"],
            "argument --pred: scores a file of captions; --output and --nearest-neighbour are "
            "for --checkpoint",
        ),
        (
            [
                "translation",
                "--checkpoint",
                "F",
                "--src",
                "F",
                "--ref",
                "F",
                "--buckets",
                "20",
                "10",
            ],
            "argument --buckets: must increase, got 20 10",
        ),  # fmt: skip
    ],
)
def test_a_report_refuses_what_its_options_cannot_do_together(argv, said, tmp_path, capsys):
    """Each task's own rules (`check` of its evaluation module) and the shared ones (buckets)
    are said before anything is read, naming the subcommand."""
    text = tmp_path / "lines.txt"
    text.write_text("a line\n")
    argv = [str(text) if a == "F" else str(tmp_path) if a == "D" else a for a in argv]
    with pytest.raises(SystemExit) as exit_:
        main(["evaluate", *argv])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert f"seqtasks evaluate {argv[0]}: error: {said}" in error


def test_lightnings_help_says_at_once_what_it_is_waiting_for(capsys):
    """`seqtasks fit --help` spends seconds importing PyTorch and Lightning before its parser can
    answer: a line on stderr says so first, rather than a silence."""
    with pytest.raises(SystemExit) as done:
        main(["fit", "--help"])
    out, err = capsys.readouterr()
    assert done.value.code == 0 and "--config CONFIG" in out
    assert err.splitlines()[0] == (
        "seqtasks fit: reading Lightning's options (importing PyTorch and Lightning takes a few "
        "seconds)…"
    )
