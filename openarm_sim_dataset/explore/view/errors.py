"""The viewer's own refusal: a URL that names nothing in the dataset, which the server answers with 404."""

from __future__ import annotations


class NotFound(Exception):
    """A URL that names nothing in the dataset (HTTP 404); the message says what."""
