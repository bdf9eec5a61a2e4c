"""Scoring a trained model on a whole split the way its field does: the reports that
`seqtasks evaluate` prints, as data (a JSON-ready dict) and as the lines a person reads."""
