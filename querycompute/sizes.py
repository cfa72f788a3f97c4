"""Byte sizes as people write them ("500MB", "2 GiB") and as people read them."""
from __future__ import annotations

import re

# Decimal units as disk vendors and `du --si` use them, binary units spelled with an "i".
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")


def parse_size(text: str) -> int:
    """'500MB' -> 500_000_000, '1.5GiB' -> 1_610_612_736, '0' -> 0."""
    match = _SIZE.fullmatch(str(text))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS:
        raise ValueError(f"cannot read {text!r} as a size: write a number with an optional "
                         f"unit, e.g. 500MB, 2GB, 512KiB or 1000000 (bytes)")
    return int(float(match.group(1)) * _UNITS[unit])


def format_size(n: int) -> str:
    """1234567 -> '1.2 MB' (decimal units, like parse_size's MB)."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")
