"""The ``incremental_ivm`` configs both dbt adapters accept, checked in one place.

>>> config_problem("totals", ivm_on_unsupported="fail", ivm_strategy="auto") is None
True
>>> config_problem("totals", ivm_strategy="sometimes")
"model totals: ivm_strategy must be one of ('auto', 'incremental', 'full'), got 'sometimes'"
"""

from __future__ import annotations

from duckstream.strategy import STRATEGIES

ON_UNSUPPORTED = ("fail", "full_refresh")
ON_CONFIGURATION_CHANGE = ("apply", "continue", "fail")  # dbt's materialized views' choices
CHOICES: dict[str, tuple[str, ...]] = {
    "ivm_on_unsupported": ON_UNSUPPORTED,
    "ivm_strategy": STRATEGIES,
    "on_configuration_change": ON_CONFIGURATION_CHANGE,
}


def config_problem(model: str, **configs: str) -> str | None:
    """Why one of ``model``'s configs (named as in dbt) has a value it may not have, or None."""
    for name, value in configs.items():
        if value not in CHOICES[name]:
            return f"model {model}: {name} must be one of {CHOICES[name]}, got {value!r}"
    return None
