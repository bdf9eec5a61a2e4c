"""Constituency parsing as translation (Vinyals et al. 2015): trees, their bracket sequences,
vocabularies and the output grammar, its LightningModule, the `Parser` that `seqtasks.load`
returns, `seqtasks parse`, `seqtasks evaluate parsing` (EVALB's conventions) and the /parse
endpoint."""

from seqtasks.registry import Command, TaskEntry

TASK = TaskEntry(
    __name__,
    "parsing",
    task=".task.ParsingTask",
    model=".parser.Parser",
    api=("Parser", "Parse"),
    data=(".data.ParsingData",),
    command=Command("parse", "parse text into Penn Treebank trees"),
    evaluation=".evaluation",
    endpoint=".endpoint.ParseEndpoint",
    hub_tag="text2text-generation",
)
