"""An image upload as /caption receives it: the body is either the encoded image itself (`curl
--data-binary @photo.jpg -H 'Content-Type: image/jpeg'`) or a multipart form (`curl -F
image=@photo.jpg -F beam=5`) with the image in a file field and optional text fields.

LitServe hands the endpoint the body's bytes but not its headers, so a form is recognised by
its first line, the `--BOUNDARY` delimiter that every multipart body opens with (no image format
starts with "--"), and read with the standard library's MIME parser (FastAPI's own form parsing
needs the python-multipart package).
"""

from __future__ import annotations

import email.parser
import email.policy
import re
from dataclasses import dataclass, field

BOUNDARY = re.compile(rb"--([0-9A-Za-z'()+_,./:=?-]{1,70})\r?\n")
IMAGE_FIELDS = ("image", "file")


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
        UploadError: for an empty body, or a form without exactly one image file.
    """
    if not body:
        raise UploadError("the body is empty: send an image, or a form with an image file")
    delimiter = BOUNDARY.match(body)
    if delimiter is None:
        return Upload(body)
    return _read_form(body, delimiter.group(1).decode("ascii"))


def _read_form(body: bytes, boundary: str) -> Upload:
    header = f'Content-Type: multipart/form-data; boundary="{boundary}"\r\n\r\n'.encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(header + body)
    if not message.is_multipart():
        raise UploadError("the body starts like a multipart form but is not one")
    files: dict[str, bytes] = {}
    fields: dict[str, str] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition") or ""
        payload = part.get_payload(decode=True) or b""
        if part.get_filename() is not None:
            files[name] = payload
        else:
            fields[name] = payload.decode("utf-8", "replace").strip()
    chosen = [name for name in IMAGE_FIELDS if name in files]
    if chosen:
        return Upload(files[chosen[0]], fields)
    if len(files) == 1:
        return Upload(next(iter(files.values())), fields)
    found = ", ".join(sorted(files)) or "none"
    raise UploadError(
        f"the form must hold one image file, in a field named 'image' (file fields: {found})"
    )
