"""Names (of datasets, files, jobs, models, tokens): one line of visible text.

`Name` and `check_name` refuse every control character and the bidirectional controls
(U+202E...), which would make a name display as another.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from thinker.errors import ConfigError

NOT_STORABLE = r"\x00\ud800-\udfff"  # NUL and lone surrogates: PostgreSQL stores neither
TEXT_CONTROLS = r"\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"  # controls but \t \n \r
_BIDI = r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # they reorder what is displayed
_NAME = re.compile(f"[{NOT_STORABLE}{TEXT_CONTROLS}\t\n\r\u2028\u2029{_BIDI}]")


def character(c: str) -> str:
    name = unicodedata.name(c, "") if not "\ud800" <= c <= "\udfff" else "a lone surrogate"
    return f"U+{ord(c):04X}" + (f" ({name})" if name else " (a control character)")


# ---- names -------------------------------------------------------------------------------


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a name (one line of visible text), or None."""
    found = _NAME.search(name)
    if found is None:
        return None
    return (
        f"holds {character(found[0])} at position {found.start()}; a name is one line of "
        "text without control or bidirectional-override characters"
    )


def check_name(what: str, name: str) -> str:
    """`name` as given; raises ConfigError (422) naming `what` when it is not a name."""
    if (problem := name_problem(name)) is not None:
        raise ConfigError(f"{what}: {problem}")
    return name


def _valid_name(name: str) -> str:
    if (problem := name_problem(name)) is not None:
        raise PydanticCustomError("name", problem)  # the message as it is, no "Value error"
    return name


Name = Annotated[str, AfterValidator(_valid_name)]  # add a max_length where it is used
