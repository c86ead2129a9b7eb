"""Set-up of the fork server that grainfn's workers are forked from; imported only there.

When the main program runs with `python -m package.module`, the fork server
preloads `package.module` so that every worker starts with its imports done.
Each worker then runs the module again as `__mp_main__` (multiprocessing's
rule, so that its functions unpickle), and `runpy` warns that the module is
already imported. That is expected here and harmless, so the warning is
silenced in the fork server and the workers forked from it, and only there.
"""

import warnings

warnings.filterwarnings(
    "ignore",
    message=r".* found in sys\.modules after import of package .*, but prior to execution of",
    category=RuntimeWarning,
)
