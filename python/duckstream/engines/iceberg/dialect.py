"""The Spark SQL that duckstream generates: sqlglot's Spark dialect plus two conventions.

- Spark reads bare identifiers of ASCII letters, digits and ``_`` only; any other name
  (``Größe``) is rendered in backticks, however it was spelled in the view. So is a name
  that is a keyword (``select``): Spark's own parser often takes it bare, but the SQL must
  also parse back (the runner reads the plan's statements with sqlglot).
- A series in FROM (``GenerateSeries``) is Spark's ``range`` (:mod:`.series`); a table
  function over a row's columns (``LATERAL unnest(...)``) an ``EXPLODE`` (:mod:`.lateral`).
- ``ROW_NUMBER() OVER ()`` is an error in Spark ("requires window to be ordered"); the sinks
  number rows where any order will do, so such windows are rendered ``ORDER BY NULL``.
- Run-time values are written ``${duckstream.<view>.<name>}``: Spark's own variable
  substitution syntax. :mod:`.runner` fills them in from the plan's value
  queries; by hand, ``SET duckstream.<view>.<name> = <value>`` does the same, because Spark
  substitutes ``${key}`` from the session configuration before parsing
  (``spark.sql.variable.substitute``, on by default).

"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.generators.spark import SparkGenerator

from duckstream.connection import literal
from duckstream.engines.iceberg.lateral import explode_laterals
from duckstream.engines.iceberg.series import spark_range
from duckstream.expressions import RaiseError

PREFIX = "duckstream"


_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_SELECT = SparkGenerator.TRANSFORMS[exp.Select]


class IcebergSpark(Spark):
    """Spark 3.5 as duckstream writes it (registered in sqlglot as ``icebergspark``)."""

    class Generator(SparkGenerator):
        TRANSFORMS = {
            # without sqlglot's series rewrite of tables (table_sql below renders them)
            **{k: v for k, v in SparkGenerator.TRANSFORMS.items() if k is not exp.Table},
            RaiseError: lambda self, e: self.func("RAISE_ERROR", e.this),
            # a table function over a row's columns (normalize.lateral_functions) as an
            # EXPLODE (lateral.py) before sqlglot's rewrites: its unnest_to_explode would
            # make a LATERAL VIEW of it, and drop a LEFT join's side
            exp.Select: lambda self, e: _SELECT(self, explode_laterals(e)),
        }

        # Every word of sqlglot's Spark keywords: ``order`` is only in ``ORDER BY``.
        RESERVED_KEYWORDS = {
            word.lower()
            for keyword in Spark.Tokenizer.KEYWORDS
            for word in keyword.split()
            if _BARE.fullmatch(word)
        }

        def identifier_sql(self, expression: exp.Identifier) -> str:
            if not expression.quoted and not _BARE.fullmatch(expression.name):
                expression = exp.Identifier(this=expression.name, quoted=True)
            return super().identifier_sql(expression)

        def table_sql(self, expression: exp.Table, sep: str = " AS ") -> str:
            # a series in FROM (normalize.constant_relations): Spark's range (series.py)
            if isinstance(expression.this, exp.GenerateSeries):
                rendered = self.sql(spark_range(expression.this))
                alias = expression.args.get("alias")
                return f"{rendered}{sep}{self.sql(alias)}" if alias else rendered
            return super().table_sql(expression, sep)

        def window_sql(self, expression: exp.Window) -> str:
            if isinstance(expression.this, exp.RowNumber) and not expression.args.get("order"):
                expression = expression.copy()
                expression.set("order", exp.Order(expressions=[exp.Ordered(this=exp.null())]))
            return super().window_sql(expression)


DIALECT = "icebergspark"


def variable(view: str, name: str) -> str:
    """The configuration key of a run-time value of ``view`` (a slug)."""
    return f"{PREFIX}.{view}.{name}"


def placeholder(key: str) -> exp.Var:
    """``${key}`` as an expression: rendered verbatim, substituted before Spark parses it."""
    return exp.var("${" + key + "}")


def lit(value: str) -> str:
    """A Spark SQL string literal."""
    return literal(value, "spark")


def quoted(name: str) -> str:
    """A backquoted Spark identifier."""
    return "`" + name.replace("`", "``") + "`"
