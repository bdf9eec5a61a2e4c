"""Constituency parsing as translation: trees, their bracket sequences, vocabularies, the
output grammar."""
