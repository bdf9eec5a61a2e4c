"""Streaming corpora: token-id shards that are read from disk as training needs them."""
