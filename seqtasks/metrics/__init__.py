"""Metrics the fields trust, computed by their reference implementations where one exists."""
