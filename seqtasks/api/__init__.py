"""seqtasks from Python: `load` a model (or several, as an ensemble) and call it.

import seqtasks
model = seqtasks.load("best.ckpt")             # a Translator, Parser or Captioner
model = seqtasks.load("models/de-en")          # a model folder (seqtasks export --to folder)
model = seqtasks.load("hf://ORG/NAME")         # a model folder on the Hugging Face Hub
model.translate(["Ein Hund rennt."])           # / .parse(sentences) / .caption(images)
"""

from seqtasks.api.captioner import Caption, Captioner
from seqtasks.api.load import load
from seqtasks.api.model import Model
from seqtasks.api.parser import Parse, Parser
from seqtasks.api.translator import Translation, Translator

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
