"""Records as standard JSON: a non-finite float (a diverged loss) is written as a tagged object.

JSON has no NaN or infinity, and strict readers refuse Python's bare `NaN`/`Infinity`. Every
float that is not finite is written as `{"__float__": "nan"}`, `{"__float__": "inf"}` or
`{"__float__": "-inf"}` and read back as that float, so NaN stays NaN and inf stays inf. Rows
written before this convention (bare `NaN`) still read.
"""

from __future__ import annotations

import json
import math
from typing import Any

FLOAT_TAG = "__float__"
_NAMES = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _name(value: float) -> str:
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


def encode(value: Any) -> Any:
    """`value` with every non-finite float replaced by its tagged object (a new structure)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {FLOAT_TAG: _name(value)}
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encode(item) for item in value]
    return value


def _decode_object(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and obj.get(FLOAT_TAG) in _NAMES:
        return _NAMES[obj[FLOAT_TAG]]
    return obj


def dumps(value: Any, **kwargs: Any) -> str:
    """Strict JSON text (no bare NaN/Infinity); objects JSON lacks are written as str()."""
    return json.dumps(encode(value), allow_nan=False, default=str, **kwargs)


def loads(text: str) -> Any:
    """Parse JSON written by `dumps` (or an older bare-NaN row), tagged floats restored."""
    return json.loads(text, object_hook=_decode_object)
