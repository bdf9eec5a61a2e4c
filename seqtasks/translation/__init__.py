"""Machine translation: sentencepiece-tokenised parallel text (Multi30k, the dates corpus, token
shards), its LightningModule, the `Translator` that `seqtasks.load` returns, `seqtasks
translate`, `seqtasks evaluate translation` (sacreBLEU) and `seqtasks evaluate alignment`
(alignment error rate), the /translate endpoint and the CTranslate2 export."""

from seqtasks.registry import Command, TaskEntry

TASK = TaskEntry(
    __name__,
    "translation",
    task=".task.TranslationTask",
    model=".translator.Translator",
    api=("Translator", "Translation", "Alignment"),
    data=(
        ".data.TranslationData",
        ".dates.DatesData",
        ".streaming.sharded_translation.ShardedTranslationData",
    ),
    command=Command("translate", "translate text, one sentence a line"),
    evaluation=".evaluation",
    evaluations=(("alignment", ".alignment_evaluation"),),
    endpoint=".endpoint.TranslateEndpoint",
    hub_tag="translation",
    formats=(("ctranslate2", ".ctranslate2"),),
)
