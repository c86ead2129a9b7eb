"""Grain's `grain.constants`: the names of the meta features a record's dict may carry.

Grain's TFDS-style examples keep bookkeeping beside the data under these
keys; a feature named in `META_FEATURES` is not data (packing, for one,
leaves it alone in Grain). grainfn's records keep their metadata apart
(`grainfn.RecordMetadata`), so these are names only, for code that uses them.

>>> import grainfn.constants as constants
>>> constants.INDEX, constants.SEED in constants.META_FEATURES
('_index', True)
"""

INDEX = "_index"
"""The element's index in the global order."""

RECORD_KEY = "_record_key"
"""The key the source read the element by."""

DATASET_INDEX = "_dataset_index"
"""Which dataset of a mix the element came from."""

EPOCH = "_epoch"
"""The epoch the element belongs to."""

SEED = "_seed"
"""The element's random seed."""

RECORD = "_record"
"""The record itself, where it is kept beside the parsed features."""

META_FEATURES = frozenset({INDEX, RECORD_KEY, DATASET_INDEX, EPOCH, SEED, RECORD})
"""Every meta feature name."""

__all__ = ["DATASET_INDEX", "EPOCH", "INDEX", "META_FEATURES", "RECORD", "RECORD_KEY", "SEED"]
