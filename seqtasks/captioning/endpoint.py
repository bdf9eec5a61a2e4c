"""POST /caption: `seqtasks serve`'s endpoint for captioning models, the form fields an upload
may carry (the upload and its image are read by `uploads`), and its answer.

No `from __future__ import annotations` here: LitServe hands `decode_request`'s annotation to
FastAPI as the request body's type, and FastAPI reads the request's field types, as objects,
not strings.
"""

import re
from typing import Annotated, Any

import torch
from fastapi import Body
from pydantic import ValidationError

from seqtasks.captioning.uploads import UploadError, read_image, read_upload
from seqtasks.search.settings import SearchSettings
from seqtasks.serving import answers
from seqtasks.serving.batching import Job, RequestError
from seqtasks.serving.endpoint import ModelEndpoint
from seqtasks.serving.requests import SearchRequest, attention_flag
from seqtasks.serving.validation import short_value

ImageBody = Annotated[bytes, Body(media_type="application/octet-stream")]

NUMBER = re.compile(r"[0-9]{1,6}")  # a form field read as an integer: ASCII digits, not '²'


class CaptionSettings(SearchRequest):
    """The form fields an image upload may carry beside the image (`beam`, `n_best`,
    `attention`: "true" adds each word's attention over the image grid)."""

    attention: bool = attention_flag()


class CaptionEndpoint(ModelEndpoint):
    """POST /caption with an image as the body, or a multipart form with an `image` file and
    optional `beam`, `n_best`, `attention` fields (the checkpoint's unless given) ->
    `{"results": [{"text": ..., "score": ..., "alternatives": [...]}]}`, with `attention=true`
    also its `attention` over the image's grid (`answers`)."""

    path = "/caption"
    reads = "image"
    title, prompt, action = "Captioning", "Image to caption", "Caption"

    def decode_request(self, request: ImageBody) -> Job | RequestError:
        return super().decode_request(request)

    def check(self, request: bytes) -> Job:
        try:
            upload = read_upload(request)
        except UploadError as error:
            raise RequestError(422, str(error)) from None
        settings = form_settings(upload.fields)
        pixels = read_image(self.model, upload.image, self.limits.max_pixels)  # (3, S, S)
        return self.job([pixels], settings)

    def run(self, inputs: list[torch.Tensor], settings: SearchSettings, attention: bool):
        images = torch.stack(inputs)  # (B, 3, S, S)
        return self.model.caption(images, attention=attention, settings=settings)

    def answer(self, found: Any) -> dict[str, Any]:
        """A caption's answer; with its attention over the image's grid when it kept it
        (`Caption.attention` is None unless the request asked for it)."""
        if found.attention is None:
            return answers.result(found)
        grid = list(found.grid) if found.grid else None
        weights = answers.attention(found.attention, found.words, grid=grid)
        return answers.result(found, attention=weights)


def form_settings(fields: dict[str, str]) -> CaptionSettings:
    """The search settings of a /caption form's text fields (ASCII digits read as integers).

    Raises:
        RequestError: 422 naming each bad field and what it holds.
    """
    values: dict[str, Any] = {
        name: int(v) if NUMBER.fullmatch(v) else v for name, v in fields.items()
    }
    if values.get("attention") in ("true", "false"):  # as a checkbox's form sends it
        values["attention"] = values["attention"] == "true"
    try:
        return CaptionSettings.model_validate(values)
    except ValidationError as error:
        problems = "; ".join(map(_field_problem, error.errors()))
        raise RequestError(422, f"bad form field: {problems}") from None


def _field_problem(error: dict[str, Any]) -> str:
    """`beam: Input should be a valid integer (got '²')`: one of pydantic's problems."""
    where = ".".join(map(str, error["loc"])) or "form"
    return f"{where}: {error['msg']} (got {short_value(error['input'])!r})"
