"""seqtasks: swappable encoders and attention decoders for translation, captioning and parsing.

Dimension legend used in every docstring and shape comment:
    B batch, S source positions (tokens or image cells), T target positions, D model width,
    V vocabulary, L = H·W image locations, K beam size.
"""

__version__ = "0.1.0"
