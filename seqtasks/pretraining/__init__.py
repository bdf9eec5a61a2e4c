"""Pre-training a text encoder on unlabelled text (BERT's masked language model, Devlin et al.
2019, with next-sentence prediction as an option), whose encoder another task then starts from
(`pretrained_encoder`, docs/pretraining.md): the text as data, the task, and the `MaskFiller`
that `seqtasks.load` returns for its models."""

from seqtasks.registry import TaskEntry

TASK = TaskEntry(
    __name__,
    "pretraining",
    task=".task.MaskedLMTask",
    model=".filler.MaskFiller",
    api=("MaskFiller", "Filled"),
    data=(".data.MonolingualData",),
    hub_tag="fill-mask",
)
