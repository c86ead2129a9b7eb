"""Grain's states, read into grainfn's records and written from them: the translators."""
