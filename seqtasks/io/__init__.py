"""What seqtasks reads from and writes to disk and the network: atomic files, downloads,
checkpoint files, figures."""
