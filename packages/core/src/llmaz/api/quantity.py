"""Kubernetes resource quantities (``"8Gi"``, ``"500m"``, ``4``): parse, compare and print them.

One implementation shared by the renderer (merge rules) and the offline CEL evaluator
(``quantity()``), so both agree with each other on what a quantity is.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_QUANTITY = re.compile(rf"^({_NUMBER})(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")


def to_str(value: str | int | float) -> str:
    """A quantity as the string Kubernetes accepts everywhere (``1`` -> ``"1"``, ``0.5`` -> ``"0.5"``)."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = format(Decimal(repr(value)).normalize(), "f")
        return text
    return value


def parse(value: str | int | float) -> Decimal | None:
    """The numeric value of a quantity, or None when it does not parse."""
    text = to_str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    try:
        base = Decimal(number)
    except InvalidOperation:
        return None
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    try:
        return base * (Decimal(10) ** int(suffix[1:]))
    except ArithmeticError:  # decimal.Overflow: "4e93284729384729" (a hex digest) is no quantity
        return None
