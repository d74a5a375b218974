"""Numbers in messages, in plain words: ``1 h100 GPU``, ``2 dev clusters``, ``0.5 GPUs``.

Every message that counts something (queue reasons, never-fits reasons, verdicts, the
services' refusals) builds its counts here, so none says "1 GPUs" or "cluster(s)".
Pure, like the rest of :mod:`clusters.admission`.
"""

from __future__ import annotations

from decimal import Decimal

# Nouns whose plural is not the noun plus "s".
_PLURALS = {"GiB of memory": "GiB of memory", "GiB": "GiB"}


def number(amount: Decimal | int | float) -> str:
    """A quantity: ``8``, ``0.5``, never ``8.000`` or ``1E+1``."""
    return format(Decimal(str(amount)).normalize(), "f")


def plural(noun: str, amount: Decimal | int | float) -> str:
    """``noun`` after ``amount``: singular for exactly one, else its last word plus "s"
    (or its entry in ``_PLURALS``)."""
    if Decimal(str(amount)) == 1:
        return noun
    return _PLURALS.get(noun, f"{noun}s")


def count(amount: Decimal | int | float, noun: str) -> str:
    """``1 h100 GPU``, ``2 h100 GPUs``, ``0.5 GPUs``, ``0 dev clusters``."""
    return f"{number(amount)} {plural(noun, amount)}"
