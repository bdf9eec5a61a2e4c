"""seqtasks from Python: `load` a model (or several, as an ensemble) and call it.

import seqtasks
model = seqtasks.load("best.ckpt")             # a Translator, Parser or Captioner
model = seqtasks.load("models/de-en")          # a model folder (seqtasks export --to folder)
model = seqtasks.load("hf://ORG/NAME")         # a model folder on the Hugging Face Hub
model.translate(["Ein Hund rennt."])           # / .parse(sentences) / .caption(images)

What every model shares is `Model`; each task's own class (and its result type) lives in the
task's package (`seqtasks.translation.translator`, …).
"""

from seqtasks.api.load import load
from seqtasks.api.model import Model

__all__ = ["Model", "load"]
