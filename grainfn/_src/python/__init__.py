"""Grain's internal module paths (`grain._src.python...`) that published code imports.

Code written for Grain sometimes imports from Grain's private modules
(MaxText imports the TFRecord reader from
`grain._src.python.dataset.sources.tfrecord_dataset`). With `grain` resolving to
grainfn, such an import looks for the same path under `grainfn._src.python`.
Each module here has the path of one such Grain module and re-exports, under
Grain's names, the grainfn objects that do its job; nothing imports these
modules but that code (`import grainfn` does not). docs/migrating-from-grain.md
lists the paths and names covered ("Grain internals covered").
"""
