"""ArrayRecord files: a random-access source over them, and a writer that makes them.

`array_record` itself is imported only where a file is opened or written, so
that importing grainfn stays fast.
"""
