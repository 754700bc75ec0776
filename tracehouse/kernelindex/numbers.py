"""JavaScript number semantics (§1.2): JSON numbers as IEEE-754 doubles, ECMAScript
`Number::toString`, `Math.round` and `toFixed`.

`bool` is never a number; integers must lie within +-(2**53 - 1); where Python and JavaScript
disagree, JavaScript wins, since KernelIndex runs on it.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from tracehouse.kernelindex.errors import CanonicalizationError, IdentityError, json_type

MAX_SAFE_INTEGER = 2**53 - 1  # Number.MAX_SAFE_INTEGER


def is_number(value: object) -> bool:
    """A JSON number: int or float, never bool (§1.2: JavaScript keeps booleans apart)."""
    kind = type(value)
    return (
        kind is int
        or kind is float
        or (isinstance(value, int | float) and not isinstance(value, bool))
    )


def js_number(value: Any, where: str) -> int | float:
    """The double JavaScript holds for a JSON number: big integer literals become doubles."""
    if type(value) is float:
        if value - value != 0.0:
            raise IdentityError("non_finite_number", f"{where} is {value!r}")
        return value
    if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return int(value)
    try:
        return float(value)
    except OverflowError:
        raise IdentityError("non_finite_number", f"{where} overflows a double") from None


def js_integer(value: Any, where: str) -> int:
    """An integral JS number within +-(2**53 - 1) (§2.3); `2.0` counts, `true` does not."""
    if not is_number(value):
        raise IdentityError(
            "invalid_field_type", f"{where} must be an integer, got {json_type(value)}"
        )
    if type(value) is not int:
        value = float(value)
        if value - value != 0.0:
            raise IdentityError("non_finite_number", f"{where} is {value!r}")
        if not value.is_integer():
            raise IdentityError("non_integer_value", f"{where} is {value!r}, not an integer")
        value = int(value)
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise IdentityError("integer_out_of_range", f"{where} = {value} is outside +-(2**53 - 1)")
    return value


def js_to_fixed(value: float, decimals: int) -> str:
    """JavaScript `Number.prototype.toFixed`: exact binary value, ties away from zero."""
    quantum = Decimal(1).scaleb(-decimals)
    return str(Decimal(value).quantize(quantum, rounding=ROUND_HALF_UP))


def js_round(value: float) -> int:
    """JavaScript Math.round: the nearest integer, an exact half going up (towards +inf).

    Python's round() is half-to-even (2.5 → 2, JavaScript 3), and floor(x + 0.5) is wrong for
    0.49999999999999994 (the sum rounds to 1.0; JavaScript gives 0).
    """
    floor = math.floor(value)
    return floor + 1 if value - floor >= 0.5 else floor


def format_float(value: float) -> str:
    """ECMAScript Number::toString of a finite double (ECMA-262 7.1.12.1, RFC 8785 3.2.2.3)."""
    if value - value != 0.0:  # NaN or +-Infinity
        raise CanonicalizationError(f"{value!r} is not representable in JCS")
    if value == 0.0:
        return "0"  # -0.0 too
    text = repr(value)  # shortest round-trip digits, like ECMAScript
    if "e" not in text:
        # Python writes fixed notation for 1e-4 <= |x| < 1e16, where ECMAScript does too;
        # the only difference is Python's trailing ".0" on integral values.
        return text[:-2] if text.endswith(".0") else text
    return _format_exponential(text)


def _format_exponential(text: str) -> str:
    """Rewrite Python's `d.ddde±XX` repr into ECMAScript's layout for the same digits."""
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exp_text = text.partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part  # int_part is a single non-zero digit in Python's repr
    k = len(digits)
    n = int(exp_text) + 1  # value = 0.digits * 10**n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    exponent = n - 1
    exp_sign = "+" if exponent >= 0 else "-"
    head = digits[0] if k == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{head}e{exp_sign}{abs(exponent)}"
