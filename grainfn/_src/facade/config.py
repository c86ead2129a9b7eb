"""`grainfn.config`: Grain's global options object, with the options grainfn has.

Grain reads `grain.config.update(name, value)`; grainfn keeps the same call
for two options. With `py_debug_mode` true, every iterator made afterwards
(`iter(IterDataset)`, `iter(DataLoader)`) runs a timed copy of its pipeline,
whose per-stage statistics `grainfn.describe(iterator)` and
`grainfn.stage_stats(iterator)` show. With `py_dataset_visualization_output_dir`
set to a folder, every iterator made afterwards writes its pipeline there, as
the `describe` tree and a Graphviz graph. Iterators made while both are off are
untouched and pay nothing.

The config holds the instruments its options ask for (`Config.instruments`),
and an iterator passes them to `grainfn._src.core.instrument.instrumented`
as it opens its stream: the core keeps no options of its own.
"""

from __future__ import annotations

import os
from typing import Any

from grainfn._src.core.instrument import Instrument
from grainfn._src.core.stream import Stream

OPTIONS: dict[str, tuple[tuple[type, ...], Any, str]] = {
    "py_debug_mode": (
        (bool,),
        False,
        "time every stage of the iterators made from now on (see grainfn.describe)",
    ),
    "py_dataset_visualization_output_dir": (
        (str, type(None)),
        None,
        "a folder where every iterator made from now on writes its pipeline tree and graph",
    ),
}
"""Each option's type, default and meaning."""


class Config:
    """Global options, set with `update` and read as attributes (Grain's `grain.config`).

    Examples:
        >>> import grainfn
        >>> grainfn.config.py_debug_mode
        False
        >>> grainfn.config.update("py_debug_mode", True)
        >>> grainfn.config.py_debug_mode
        True
        >>> grainfn.config.update("py_debug_mode", False)
    """

    def __init__(self) -> None:
        values = {name: spec[1] for name, spec in OPTIONS.items()}
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_instruments", instruments_for(values))

    @property
    def instruments(self) -> tuple[Instrument, ...]:
        """The instruments an iterator made now goes through, for the options set now.

        grainfn's, not Grain's: an iterator passes them to `instrumented` as it
        opens its stream. Empty while both options are off.

        Examples:
            >>> config = Config()
            >>> config.instruments
            ()
            >>> config.update("py_debug_mode", True)
            >>> [instrument.__name__ for instrument in config.instruments]
            ['timed']
        """
        instruments: tuple[Instrument, ...] = self._instruments
        return instruments

    def update(self, name: str, value: Any) -> None:
        """Sets option `name` to `value`.

        Raises:
            ValueError: for an option grainfn does not have, listing those it has.
            TypeError: for a value of the wrong type.
        """
        kinds, _, _ = _spec(name)
        if isinstance(value, os.PathLike) and str in kinds:
            value = os.fspath(value)
        if not isinstance(value, kinds):
            allowed = " or ".join("None" if k is type(None) else k.__name__ for k in kinds)
            raise TypeError(
                f"config option {name!r} takes a {allowed}, got {value!r} of type "
                f"{type(value).__name__}."
            )
        self._values[name] = value
        object.__setattr__(self, "_instruments", instruments_for(self._values))

    def get_or_default(self, name: str) -> Any:
        """The value of option `name` (its default if never set)."""
        _spec(name)
        return self._values[name]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.get_or_default(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Set config options with config.update({name!r}, value).")

    def __repr__(self) -> str:
        return f"Config({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"


def instruments_for(values: dict[str, Any]) -> tuple[Instrument, ...]:
    """The instruments new iterators go through for these option values, in order.

    Examples:
        >>> instruments_for({"py_dataset_visualization_output_dir": None, "py_debug_mode": False})
        ()
    """
    instruments: list[Instrument] = []
    directory = values["py_dataset_visualization_output_dir"]
    if directory is not None:
        from grainfn._src.inspect.graph import save_pipeline  # only when asked for

        def save(stream: Stream[Any]) -> Stream[Any]:
            save_pipeline(stream, directory)
            return stream

        instruments.append(save)
    if values["py_debug_mode"]:
        from grainfn._src.inspect.timing import timed  # only when asked for

        instruments.append(timed)
    return tuple(instruments)


def _spec(name: str) -> tuple[tuple[type, ...], Any, str]:
    if name not in OPTIONS:
        known = "; ".join(f"{option!r}: {spec[2]}" for option, spec in OPTIONS.items())
        raise ValueError(
            f"Unknown config option {name!r}. grainfn has these options: {known}. Grain's other "
            "options tune implementation details grainfn does not share."
        )
    return OPTIONS[name]


config = Config()
"""The global options: `grainfn.config.update("py_debug_mode", True)` times new iterators."""
