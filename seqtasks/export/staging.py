"""An output folder that is checked before any work, never half-written over a good one, and
never loses an input: it is built in a hidden sibling folder and renamed into place only once
complete.

The sibling is named as seqtasks' temporary files are (`.NAME.XXXXXXXX.HOST-PID.tmp`,
`seqtasks.io.files.temporary_folder`). A replaced OUT is first moved aside into
`.NAME.XXXXXXXX.HOST-PID.old`, and that is renamed to a `.tmp` folder before it is removed, so an
`.old` folder always holds a complete OUT. What a killed export of this machine left is cleaned
by the next export into the same folder (`clean_interrupted`): an OUT moved aside goes back
under its name if nothing took its place; staging folders are removed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from seqtasks.io.files import remove_stale_temporaries, stale_temporaries, temporary_folder
from seqtasks.io.outputs import OutputError, check_output

MIB = 1 << 20


class ExportError(ValueError):
    """A checkpoint that the target runtime cannot run, or an output folder that must not or
    cannot be written; the message names the file or folder and the reason."""


def refuse_existing(out: Path, force: bool) -> None:
    """Raise an `ExportError` if `out` is a file, or a folder with something in it and `force`
    is off."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a folder; choose another output folder")
    if not force and out.is_dir() and any(out.iterdir()):
        raise ExportError(f"{out} exists and is not empty; pass --force to replace it")


def prepare_output(out: Path, checkpoint: Path | None, force: bool) -> Path:
    """The folder to write for the OUT argument `out`, checked before the checkpoint is read:
    OUT is not the checkpoint, does not hold it (nor seqtasks' own files) and can be written;
    its parent can take the staging folder; what killed exports left beside it is cleaned; a
    non-empty OUT needs `force`. A symbolic link is followed: the folder it names is written.

    Raises:
        ExportError: saying what is wrong with OUT.
    """
    try:
        check_output(out, "OUT", {"the checkpoint": checkpoint}, folder=True, replaces=True)
        real = Path(os.path.realpath(out))
        if real.exists():  # replacing it takes a sibling folder and a rename in its parent
            check_output(real.parent, "OUT's folder", folder=True)
    except OutputError as error:
        raise ExportError(str(error)) from None
    clean_interrupted(real.parent)
    refuse_existing(out, force)
    return real


def clean_interrupted(parent: Path) -> None:
    """Undo in `parent` what exports killed on this machine left: an OUT that was moved aside
    (`.NAME.….old/NAME`) goes back under its name if that is free (the export was killed
    between its two renames), and is removed if the new OUT took its place; staging folders are
    removed. Those of running exports are left alone."""
    for aside in stale_temporaries(parent, "old"):
        moved = list(aside.iterdir())
        if len(moved) == 1 and not os.path.lexists(parent / moved[0].name):
            os.rename(moved[0], parent / moved[0].name)
        shutil.rmtree(aside, ignore_errors=True)
    remove_stale_temporaries(parent)


def require_space(out: Path, needed: int) -> None:
    """Raise an `ExportError` if the disk that `out`'s staging folder goes to has fewer than
    `needed` bytes free (the old OUT stays until the new one is complete)."""
    folder = out.parent
    while not folder.exists():
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise ExportError(
            f"{out} needs about {needed / MIB:.1f} MiB and {folder} has {free / MIB:.1f} MiB "
            "free; free some space or choose another output folder"
        )


@contextmanager
def staged_directory(out: Path, force: bool = False) -> Iterator[Path]:
    """A new, empty hidden sibling of the folder `out` (an absolute path without links, as
    `prepare_output` gives) to fill; when the block ends without an error it becomes `out`. If
    the block raises, `out` is left as it was and the sibling is removed; an `OSError` becomes
    an `ExportError` that says so.

    An empty `out` is replaced; a non-empty one only with `force`, and then it is first moved
    aside and removed after the new folder is in place, so at every moment a complete folder
    exists under one of the two names.
    """
    staging = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = temporary_folder(out)
        yield staging
        refuse_existing(out, force)  # again: something may have appeared meanwhile
        _move_into_place(staging, out)
    except OSError as error:
        raise ExportError(
            f"could not write {out}: {error}; {out} is as it was, and the new model was not kept"
        ) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _move_into_place(staging: Path, out: Path) -> None:
    """Rename the complete folder `staging` to `out`, replacing what is there; if that fails,
    `out` is put back as it was."""
    if not out.exists() or not any(out.iterdir()):
        os.replace(staging, out)  # one atomic rename, onto nothing or an empty folder
        return
    aside = temporary_folder(out, "old")
    os.rename(out, aside / out.name)
    try:
        os.rename(staging, out)
    except OSError as error:
        try:
            os.rename(aside / out.name, out)
        except OSError:
            raise ExportError(
                f"could not move the new model into {out} ({error}), nor {out} back: it is "
                f"complete in {aside / out.name}, which the next export here puts back"
            ) from None
        aside.rmdir()
        raise
    garbage = aside.with_suffix(".tmp")  # no longer a complete OUT: a plain temporary folder
    os.rename(aside, garbage)
    shutil.rmtree(garbage, ignore_errors=True)
