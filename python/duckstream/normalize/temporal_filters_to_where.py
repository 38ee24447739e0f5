"""Move the temporal filters of inner joins' ``ON`` into ``WHERE``, where the operator tree
maintains them (:mod:`duckstream.tree.temporal_filter`).

An inner join's condition filters the rows the join produces, so a conjunct of it may as
well filter them after the joins that follow: later inner and LEFT joins keep or extend
every row, whatever their own conditions. A RIGHT or FULL join later would NULL-extend its
other side's rows instead: then the condition stays where it is (the clock there is read as
the refresh's, and a move rebuilds: ``compiler._read_clock``). Runs after
:func:`~duckstream.normalize.pin_clock.pin_clock` (it finds the clock by its marks).

>>> from sqlglot import parse_one
>>> from duckstream.normalize.pin_clock import pin_clock
>>> def moved(sql):
...     return temporal_filters_to_where(pin_clock(parse_one(sql))).sql()
>>> moved("SELECT * FROM a JOIN b ON a.k = b.k AND b.d >= current_date - 7")
"SELECT * FROM a JOIN b ON a.k = b.k WHERE b.d >= _IVM_CLOCK('current_date') - 7"
>>> moved("SELECT * FROM a JOIN b ON b.d > current_date FULL JOIN c ON a.k = c.k")
"SELECT * FROM a JOIN b ON b.d > _IVM_CLOCK('current_date') FULL JOIN c ON a.k = c.k"
"""

from __future__ import annotations

from sqlglot import exp

from duckstream.normalize.pin_clock import is_temporal_filter


def temporal_filters_to_where(expression: exp.Expr) -> exp.Expr:
    expression = expression.copy()
    for select in list(expression.find_all(exp.Select)):
        joins = select.args.get("joins") or []
        for i, join in enumerate(joins):
            side, kind = (join.side or "").upper(), (join.kind or "").upper()
            on = join.args.get("on")
            if side or kind not in ("", "INNER", "CROSS") or on is None:
                continue
            if any((j.side or "").upper() in ("RIGHT", "FULL") for j in joins[i + 1 :]):
                continue
            parts = list(on.flatten()) if isinstance(on, exp.And) else [on]
            moving = [p for p in parts if is_temporal_filter(p)]
            if not moving:
                continue
            kept = [p for p in parts if not is_temporal_filter(p)]
            join.set("on", exp.and_(*kept) if kept else exp.true())
            select.where(*moving, copy=False)
    return expression
