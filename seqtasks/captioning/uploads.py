"""An image upload as /caption receives it, and its pixels. The body is either the encoded image
itself (`curl --data-binary @photo.jpg -H 'Content-Type: image/jpeg'`) or a multipart form (`curl
-F image=@photo.jpg -F beam=5`, read by `seqtasks.serving.forms`) with the image in a file field
and optional text fields; no image format starts with "--", which every form does.

The image's size is looked up in its header before anything is decoded, so that an image of
more pixels than the server takes (a decompression bomb: a few kilobytes of PNG can hold
gigapixels) is refused with 413 instead of filling the worker's memory; then the model's own
reader decodes it. Whatever Pillow raises on bytes it cannot read (OSError, and also
SyntaxError, ValueError … on damaged files) is that request's 422.
"""

from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from PIL import Image
from torch import Tensor

from seqtasks.serving.batching import RequestError
from seqtasks.serving.forms import FormError, read_form

IMAGE_FIELDS = ("image", "file")
MAX_PARTS = 8  # an image and its beam, n_best and attention fields, with room to spare
BOMB = re.compile(r"Image size \((\d+) pixels\)")  # how Pillow's DecompressionBombError says it


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
    try:
        form = read_form(body, MAX_PARTS, "one image file and at most the fields beam and n_best")
    except FormError as error:
        raise UploadError(str(error)) from None
    if form is None:
        return Upload(body)
    files = form.files
    chosen = [name for name in IMAGE_FIELDS if name in files]
    if chosen:
        return Upload(files[chosen[0]], form.fields)
    if len(files) == 1:
        return Upload(next(iter(files.values())), form.fields)
    found = ", ".join(sorted(name[:40] for name in files)) or "none"
    raise UploadError(
        f"the form must hold one image file, in a field named 'image' (file fields: {found})"
    )


def image_pixels(data: bytes) -> int | None:
    """The pixels (width × height) an encoded image says it has, read from its header alone
    (also when Pillow would refuse it as a decompression bomb); None when Pillow cannot tell,
    and the model's reader then says why."""
    try:
        with warnings.catch_warnings():  # Pillow's DecompressionBombWarning: checked here
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
    except Image.DecompressionBombError as error:
        found = BOMB.search(str(error))
        return int(found[1]) if found else None
    except Exception:  # not an image, or a damaged one
        return None
    return width * height


def read_image(model: Any, data: bytes, max_pixels: int) -> Tensor:
    """(3, S, S) the pixels of an uploaded image at the size the captioner `model` reads.

    Raises:
        RequestError: 413 for an image of more than `max_pixels` pixels, 422 for bytes that
            are not an image Pillow can decode, saying why.
    """
    pixels = image_pixels(data)
    if pixels is not None and pixels > max_pixels:
        raise RequestError(
            413,
            f"the image has {pixels:,} pixels; this server takes at most {max_pixels:,} (send a "
            f"smaller copy: the model reads images at {model.image_size}×{model.image_size})",
        )
    try:
        return model.read([data])[0]
    except Exception as error:  # OSError "cannot read image #0 (N bytes): <Pillow's reason>"
        reason = str(error).partition(": ")[2] if isinstance(error, OSError) else repr(error)
        raise RequestError(
            422, f"cannot read the image ({len(data)} bytes): {reason[:300]}"
        ) from None
