"""An image upload as /caption receives it: the body is either the encoded image itself (`curl
--data-binary @photo.jpg -H 'Content-Type: image/jpeg'`) or a multipart form (`curl -F
image=@photo.jpg -F beam=5`) with the image in a file field and optional text fields.

LitServe hands the endpoint the body's bytes but not its headers, so a form is recognised by
its first line, the `--BOUNDARY` delimiter that every multipart body opens with (no image format
starts with "--"), and read with the standard library's MIME parser (FastAPI's own form parsing
needs the python-multipart package). That parser reads anything, so what it cannot make sense
of is refused here by name: a form cut short, a part without a name, a field given twice, a
value that is not UTF-8, more parts than a caption request has, or whatever it raises.
"""

from __future__ import annotations

import email.parser
import email.policy
import re
from dataclasses import dataclass, field
from email.errors import CloseBoundaryNotFoundDefect

BOUNDARY = re.compile(rb"--([0-9A-Za-z'()+_,./:=?-]{1,70})\r?\n")
IMAGE_FIELDS = ("image", "file")
MAX_PARTS = 8  # an image and its beam and n_best fields, with room to spare


class UploadError(ValueError):
    """A body that holds no image to caption (the message says why)."""


@dataclass
class Upload:
    """The image's encoded bytes and the form's text fields (none for a raw body)."""

    image: bytes
    fields: dict[str, str] = field(default_factory=dict)


def read_upload(body: bytes) -> Upload:
    """The image and form fields of a /caption body: a raw image, or a multipart form whose
    file field is named `image` (or `file`, or is the only file).

    Raises:
        UploadError: for an empty body, or a form that is not one image file and a few UTF-8
            text fields, each named once.
    """
    if not body:
        raise UploadError("the body is empty: send an image, or a form with an image file")
    delimiter = BOUNDARY.match(body)
    if delimiter is None:
        return Upload(body)
    boundary = delimiter.group(1)
    parts = body.count(b"--" + boundary) - 1  # the last delimiter closes the form
    if parts > MAX_PARTS:
        raise UploadError(
            f"the form has {parts} parts; send one image file and at most the fields beam and "
            "n_best"
        )
    try:
        return _read_form(body, boundary.decode("ascii"))
    except UploadError:
        raise
    except Exception as error:  # the email package on input it was not written for
        raise UploadError(f"cannot read the form ({type(error).__name__})") from None


def _read_form(body: bytes, boundary: str) -> Upload:
    header = f'Content-Type: multipart/form-data; boundary="{boundary}"\r\n\r\n'.encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(header + body)
    if not message.is_multipart():
        raise UploadError("the body starts like a multipart form but is not one")
    if any(isinstance(defect, CloseBoundaryNotFoundDefect) for defect in message.defects):
        raise UploadError(
            f"the form does not end with its closing line --{boundary}-- (cut short?)"
        )
    files: dict[str, bytes] = {}
    fields: dict[str, str] = {}
    for number, part in enumerate(message.iter_parts()):
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or not name:
            raise UploadError(f"part {number} of the form has no name (Content-Disposition)")
        if name in files or name in fields:
            raise UploadError(f"the form has two fields named {name[:40]!r}: send each once")
        payload = part.get_payload(decode=True) or b""
        if part.get_filename() is not None:
            files[name] = payload
            continue
        try:
            fields[name] = payload.decode("utf-8").strip()
        except UnicodeDecodeError as error:
            raise UploadError(
                f"form field {name[:40]!r} is not UTF-8 text (byte {error.start})"
            ) from None
    chosen = [name for name in IMAGE_FIELDS if name in files]
    if chosen:
        return Upload(files[chosen[0]], fields)
    if len(files) == 1:
        return Upload(next(iter(files.values())), fields)
    found = ", ".join(sorted(name[:40] for name in files)) or "none"
    raise UploadError(
        f"the form must hold one image file, in a field named 'image' (file fields: {found})"
    )
