"""Comparing typed candidates (grading/candidates.py) with a gold's parts: does a candidate state a part, agree with it, compete?

- `asserts(c, g)`: c states gold part g in some format, at least as precisely (a number that rounds to the gold, the
  same measure in another unit to as many significant digits, a day inside a gold period, the same person);
- `agrees(c, g)`: c does not contradict g (coarser, finer, a part of the name, the same quantity in another unit);
- `competes(c, parts)`: c is a candidate of the gold's type (a number that is bare or counts what the gold counts).
"""

from __future__ import annotations

import re
from decimal import Decimal

from . import candidates as cand
from .candidates import Candidate, Quantity
from .normalize import PERIODS


_PLURAL = re.compile(r"[^\W\d_]{2,}(?<!s)s$")  # what a number counts, in the plural ("storeys", "points"; not "glass")


def half_ulp(d: Decimal) -> Decimal:
    return Decimal(5).scaleb(d.as_tuple().exponent - 1)


def digits(d: Decimal) -> int:
    """Significant digits as written ("126" 3, "0.0384" 3, "38.40" 4)."""
    t = d.as_tuple()
    digits = list(t.digits)
    while t.exponent >= 0 and len(digits) > 1 and digits[-1] == 0:
        digits.pop()  # "1000 kg": the zeros of a whole number hold its place, not its precision
    return max(1, len(digits) - next((i for i, x in enumerate(digits) if x), len(digits) - 1))


def trailing_zero(d: Decimal) -> bool:
    t = d.as_tuple()
    return t.exponent < 0 and t.digits[-1] == 0


def asserts(c: Candidate, g: Candidate, units: set[str]) -> bool:
    """c states gold part g (in some format, at least as precisely)."""
    if c.kind != g.kind:
        return False
    if c.kind == "number":
        measure = g.value.unit or (next(iter(units)) if len(units) == 1 else None)
        if measure and not g.value.noun and c.value.noun and not c.value.unit and _PLURAL.search(c.text):
            return False  # "38.4 storeys" counts things: no bare "38.4" of a gold measured in metres
        return states_number(c.value, g.value, units)
    if c.kind == "date":
        return all(gv is None or cv == gv or (isinstance(gv, str) and cv in PERIODS.get(gv, ())) for cv, gv in zip(c.value, g.value))
    if c.kind == "time":
        return c.value[:2] == g.value[:2] and (g.value[2] is None or c.value[2] == g.value[2])
    if c.kind == "person":
        return set(c.value) - {"jr"} == set(g.value) - {"jr"}
    return c.value == g.value


def states_number(q: Quantity, gq: Quantity, units: set[str]) -> bool:
    unit = gq.unit or (next(iter(units)) if len(units) == 1 else None)  # a bare alias ("38.4") takes the gold's unit
    if gq.noun and q.unit:
        return False  # the gold counts things ("12 lighthouses"); a measure in a unit is something else
    if q.unit != unit and not (unit is None and q.unit is None):
        if q.unit is None and gq.unit is None:
            pass  # a bare number for a bare alias of a gold with a unit: read in that unit
        elif q.unit is None or unit is None:
            return q.unit is None and gq.unit is None
    exact = len(gq.readings) > 1  # "8K" stands for exactly 8,000 or 8,192: a finer number must round from one of them
    for gr in gq.readings:
        for cr in q.readings:
            if q.unit and unit and q.unit != unit:
                conv = cand.convert(cr, q.unit, unit)
                if conv is None:
                    return False
                if digits(cr) >= digits(gr) and abs(conv - gr) <= half_ulp(gr):  # "126 feet" for 38.4 metres
                    return True
                continue
            if cr.normalize() == gr.normalize() and not (not gq.unit and not gq.noun and trailing_zero(gr)
                                                         and cr.as_tuple().exponent > gr.as_tuple().exponent):
                return True  # the same number ("3.1" is not a gold written "3.10")
            if cr.as_tuple().exponent <= gr.as_tuple().exponent and abs(cr - gr) <= half_ulp(gr):
                if not exact or any(abs(cr - r) <= half_ulp(cr) for r in gq.readings):
                    return True  # more precise, and rounds to the gold ("1,543,714,304" for "1.54B")
    return False


def agrees(c: Candidate, g: Candidate, units: set[str]) -> bool:
    """c does not contradict gold part g of its kind (it may be coarser, finer or a part of it)."""
    if c.kind == "number":
        q, gq = c.value, g.value
        unit = gq.unit or (next(iter(units)) if len(units) == 1 else None)
        for cr in q.readings:
            for gr in gq.readings:
                slack = half_ulp(gr) if len(gq.readings) == 1 else Decimal(0)  # "1K" is exactly 1,000 or 1,024: 512 is neither
                if q.unit and unit and q.unit != unit:
                    factor = cand.scale_of(unit, q.unit)
                    gr = cand.convert(gr, unit, q.unit)
                    if gr is None:
                        continue
                    slack *= abs(factor)
                if abs(cr - gr) <= max(half_ulp(cr), slack):  # one rounds to the other
                    return True
        return False
    if c.kind == "date":
        return all(date_part_agrees(cv, gv) for cv, gv in zip(c.value, g.value))
    if c.kind == "time":
        return c.value[:2] == g.value[:2] and (c.value[2] is None or g.value[2] is None or c.value[2] == g.value[2])
    if c.kind in ("person", "entity"):
        a, b = set(c.value) - {"jr"}, set(g.value) - {"jr"}
        return a <= b or b <= a
    return c.value == g.value


def date_part_agrees(cv, gv) -> bool:
    if cv is None or gv is None or cv == gv:
        return True
    months = lambda v: set(PERIODS.get(v, ())) if isinstance(v, str) else {v}
    return bool(months(cv) & months(gv))


def competes(c: Candidate, parts: list[Candidate], units: set[str], nouns: set[str]) -> bool:
    """c is a candidate of the gold's type: its kind is a gold part's, and a number is bare or about the same thing."""
    if not any(p.kind == c.kind for p in parts):
        return False
    if c.kind != "number":
        return True
    q: Quantity = c.value
    if q.unit:
        return any(cand.dimension(q.unit) == cand.dimension(u) for u in units)
    return q.noun is None or q.noun in nouns
