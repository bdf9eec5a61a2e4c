"""A multipart form in a request body (`curl -F name=@file -F field=value`), read without its
headers: LitServe hands an endpoint the body's bytes but not its Content-Type, so a form is
recognised by its first line, the `--BOUNDARY` delimiter every multipart body opens with, and
read with the standard library's MIME parser (FastAPI's own form parsing needs the
python-multipart package). That parser reads anything, so what it cannot make sense of is
refused here by name: a form cut short, a part without a name, a field given twice, a value
that is not UTF-8, more parts than the endpoint takes, or whatever it raises.

Any endpoint that takes uploads may read its body so; what it makes of the files and fields is
its own (/caption's: `seqtasks.captioning.uploads`).
"""

from __future__ import annotations

import email.parser
import email.policy
import re
from dataclasses import dataclass, field
from email.errors import CloseBoundaryNotFoundDefect

BOUNDARY = re.compile(rb"--([0-9A-Za-z'()+_,./:=?-]{1,70})\r?\n")


class FormError(ValueError):
    """A body that opens as a multipart form but cannot be read as one (the message says why)."""


@dataclass
class Form:
    """A form's files (name -> bytes) and text fields (name -> its text, stripped)."""

    files: dict[str, bytes] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)


def read_form(body: bytes, max_parts: int, expected: str) -> Form | None:
    """The files and fields of `body`, or None when it is no multipart form (it does not open
    with a `--BOUNDARY` line); `expected` says what a form should hold, for the message that
    refuses more than `max_parts` parts.

    Raises:
        FormError: for a form of more than `max_parts` parts, one cut short, a part without a
            name, a field given twice or a value that is not UTF-8, or whatever the MIME parser
            raises on it.
    """
    delimiter = BOUNDARY.match(body)
    if delimiter is None:
        return None
    boundary = delimiter.group(1)
    parts = body.count(b"--" + boundary) - 1  # the last delimiter closes the form
    if parts > max_parts:
        raise FormError(f"the form has {parts} parts; send {expected}")
    try:
        return _read_form(body, boundary.decode("ascii"))
    except FormError:
        raise
    except Exception as error:  # the email package on input it was not written for
        raise FormError(f"cannot read the form ({type(error).__name__})") from None


def _read_form(body: bytes, boundary: str) -> Form:
    header = f'Content-Type: multipart/form-data; boundary="{boundary}"\r\n\r\n'.encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(header + body)
    if not message.is_multipart():
        raise FormError("the body starts like a multipart form but is not one")
    if any(isinstance(defect, CloseBoundaryNotFoundDefect) for defect in message.defects):
        raise FormError(f"the form does not end with its closing line --{boundary}-- (cut short?)")
    form = Form()
    for number, part in enumerate(message.iter_parts()):
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or not name:
            raise FormError(f"part {number} of the form has no name (Content-Disposition)")
        files, fields = form.files, form.fields
        if name in files or name in fields:
            raise FormError(f"the form has two fields named {name[:40]!r}: send each once")
        payload = part.get_payload(decode=True) or b""
        if part.get_filename() is not None:
            files[name] = payload
            continue
        try:
            fields[name] = payload.decode("utf-8").strip()
        except UnicodeDecodeError as error:
            raise FormError(
                f"form field {name[:40]!r} is not UTF-8 text (byte {error.start})"
            ) from None
    return form
