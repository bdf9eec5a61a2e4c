"""Image captioning: Flickr8k/30k and the generated shapes world, its LightningModule, the
`Captioner` that `seqtasks.load` returns, `seqtasks caption`, `seqtasks evaluate captioning`
(coco-caption's BLEU and CIDEr-D, the shapes world's judgements) and the /caption endpoint."""

from seqtasks.registry import Command, TaskEntry

TASK = TaskEntry(
    __name__,
    "captioning",
    task=".task.CaptioningTask",
    model=".captioner.Captioner",
    api=("Captioner", "Caption"),
    data=(".data.CaptionData", ".data.ShapesData"),
    command=Command("caption", "caption images, one JSON line each"),
    evaluation=".evaluation",
    endpoint=".endpoint.CaptionEndpoint",
    hub_tag="image-to-text",
)
