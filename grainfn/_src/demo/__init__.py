"""The built-in demo, `python -m grainfn demo`: a JAX training job, preempted and resumed.

`data` writes synthetic images to ArrayRecord files and builds the Grain-style
input pipeline; `train` holds the model, the training loop and the Orbax
checkpoints; `preempted` is the training job the demo kills; `runner` puts it all
together and checks that the resumed run matches an uninterrupted one.
"""

from grainfn._src.demo.runner import check_options, run

__all__ = ["check_options", "run"]
