"""Scoring a trained model on a whole split the way its field does: the reports that
`apps/evaluate.py` prints, as data (a JSON-ready dict) and as the lines a person reads."""
