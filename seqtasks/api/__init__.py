"""seqtasks from Python: `load` a checkpoint (or several, as an ensemble) and call it.

import seqtasks
model = seqtasks.load("best.ckpt")             # a Translator, Parser or Captioner
model.translate(["Ein Hund rennt."], beam=5)    # / .parse(sentences) / .caption(images)
"""

from seqtasks.api.load import load
from seqtasks.api.models import Caption, Captioner, Model, Parse, Parser, Translation, Translator

__all__ = [
    "Caption",
    "Captioner",
    "Model",
    "Parse",
    "Parser",
    "Translation",
    "Translator",
    "load",
]
