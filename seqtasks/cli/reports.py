"""What every `seqtasks evaluate` report does at its edges: say a failure in one line, end with
its JSON line, and write its output files only once the report is printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from seqtasks.io.files import write_atomic
from seqtasks.metrics.formats import rounded


def fail(error: Exception | str) -> int:
    """Say what is wrong on stderr; the status of a failed run."""
    print(f"error: {error}", file=sys.stderr)
    return 2


def json_line(report: dict[str, Any]) -> str:
    """The report as --json's last line: one JSON object, its scores `rounded`."""
    return json.dumps(rounded(report))


def write_outputs(outputs: dict[Path, str]) -> None:
    """Write each file of `outputs` (whole or not at all), once the report is printed: a file
    that cannot be written (a full disk) then costs the file, not the scores, and ends the
    command with one line naming it (`seqtasks.cli.streams`)."""
    for path, text in outputs.items():
        write_atomic(path, text)
