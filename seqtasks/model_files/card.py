"""The model card of a model folder (README.md): YAML front matter that the Hugging Face Hub
reads (library, task, languages, data, scores as a `model-index`, the licence left for the
author), then what the model is, what it reached, how it searches, and how to load it."""

from __future__ import annotations

import re
from typing import Any

import yaml

from seqtasks.registry import TaskEntry, TaskError, task_entry

_LANGUAGE = re.compile(r"^[a-z]{2}(-[A-Za-z]{2,4})?$")  # ISO 639-1, with an optional region


def _short(class_path: str) -> str:
    return class_path.rsplit(".", 1)[-1]


def _languages(data: dict[str, Any] | None) -> list[str]:
    """The data's languages that look like ISO 639-1 codes (a generated corpus' "text" and
    "iso" sides do not), once each."""
    found = (data or {}).get("languages") or []
    return list(dict.fromkeys(code for code in found if _LANGUAGE.match(str(code))))


def _scores(identity: dict[str, Any]) -> tuple[dict[str, float], str | None, int | None]:
    scores = identity.get("scores") or {}
    metrics = {
        name.removeprefix("val/"): value
        for name, value in (scores.get("metrics") or {}).items()
        if name != "val/loss"
    }
    return metrics, scores.get("split"), scores.get("step")


def front_matter(config: dict[str, Any], name: str) -> dict[str, Any]:
    """The card's metadata, as the Hub reads it."""
    identity = config["identity"]
    task, data = identity["task"], identity.get("data") or {}
    metrics, split, _ = _scores(identity)
    model = config["model"]["init_args"]
    parts = [_short(model[p]["class_path"]) for p in ("encoder", "decoder") if p in model]
    meta: dict[str, Any] = {
        "library_name": "seqtasks",
        "license": None,
        "pipeline_tag": pipeline_tag(task),
        "tags": ["seqtasks", task, *parts],
    }
    if languages := _languages(data):
        meta["language"] = languages
    if data.get("name"):
        meta["datasets"] = [data["name"]]
    if metrics:
        meta["model-index"] = [
            {
                "name": name,
                "results": [
                    {
                        "task": {"type": pipeline_tag(task) or task, "name": task},
                        "dataset": {
                            "name": data.get("name") or "unknown",
                            "type": data.get("name") or "unknown",
                            "split": split or "validation",
                        },
                        "metrics": [
                            {"type": metric, "value": value, "name": f"{metric} ({split})"}
                            for metric, value in metrics.items()
                        ],
                    }
                ],
            }
        ]
    return meta


def model_card(config: dict[str, Any], name: str = "this model") -> str:
    """README.md of a model folder whose config.json holds `config`; `name` is how the Hub
    will know it (the folder's name until it is published)."""
    identity, search = config["identity"], config["search"]
    task, data = identity["task"], identity.get("data") or {}
    model = config["model"]
    init = model["init_args"]
    metrics, split, step = _scores(identity)
    meta = yaml.safe_dump(front_matter(config, name), sort_keys=False, allow_unicode=True)
    parts = ", ".join(
        f"{part} `{_short(init[part]['class_path'])}`"
        for part in ("encoder", "decoder")
        if part in init
    )
    lines = [
        f"---\n{meta}---",
        f"# {name}",
        "",
        f"A seqtasks {task} model: `{_short(model['class_path'])}` with {parts}, written by "
        f"seqtasks {identity.get('seqtasks_version')} (model format {identity.get('format')}). "
        "Its full specification is `model` in config.json.",
        "",
        "## Training data",
        "",
    ]
    if data:
        splits = data.get("splits") or {}
        languages = " → ".join(data.get("languages") or []) or "not recorded"
        lines += [
            f"- data: {data.get('name') or 'not recorded'} (`{data.get('class_path')}`)",
            f"- languages: {languages}",
            "- splits: " + ", ".join(f"{k} `{v}`" for k, v in splits.items() if v),
        ]
    else:
        lines.append("Not recorded (the checkpoint was written without its data module).")
    lines += ["", "## Scores", ""]
    if metrics:
        lines += [
            f"The validation of the fit when this model was saved (split `{split}`, step {step}):",
            "",
            "| metric | value |",
            "|---|---|",
            *(f"| {metric} | {value:.4g} |" for metric, value in metrics.items()),
        ]
    else:
        lines.append("None recorded (an averaged model, or one saved without a validation).")
    if search:  # a model that does not search (pre-training's) has none
        lines += ["", "## Search", "", "Every caller searches with these unless it says otherwise:",
                  "", *(f"- {key}: {value}" for key, value in search.items())]  # fmt: skip
    entry = _entry(task)  # a task not installed: what it would have (its name as command)
    commands = [f"seqtasks {command_name(task)} --checkpoint hf://ORG/NAME …"]
    commands = commands if entry is None or entry.command else []
    commands += ["seqtasks serve hf://ORG/NAME"] if entry is None or entry.endpoint else []
    lines += [
        "",
        "## How to load it",
        "",
        "```python",
        "import seqtasks",
        "",
        f'model = seqtasks.load("hf://ORG/NAME")  # or the folder\'s path; a {type_name(task)}',
        "```",
        "",
        *(["```bash", *commands, "```", ""] if commands else []),
        "Loading reads `model.safetensors`, `config.json` and the tokeniser files only, each "
        "checked against the sizes and SHA-256 sums in config.json; nothing in this folder is "
        "unpickled. `pip install 'seqtasks[hub]'` for `hf://` names.",
        "",
        "## Licence",
        "",
        "The `license` field above is left for the model's author to fill in.",
        "",
    ]
    return "\n".join(lines)


def _entry(task: str) -> TaskEntry | None:
    try:
        return task_entry(task)
    except TaskError:  # a card still says what it can of a model of a task not installed
        return None


def pipeline_tag(task: str) -> str | None:
    """The Hub's name for what a model of `task` does (`TaskEntry.hub_tag`)."""
    entry = _entry(task)
    return entry.hub_tag if entry else None


def command_name(task: str) -> str:
    """The `seqtasks` command that runs a model of `task` (its name if it has none)."""
    entry = _entry(task)
    return entry.command.name if entry and entry.command else task


def type_name(task: str) -> str:
    """The class `seqtasks.load` returns for a model of `task`."""
    entry = _entry(task)
    return entry.model.rpartition(".")[2] if entry else "model"
