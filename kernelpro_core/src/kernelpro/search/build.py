"""A registered search policy built by name: for a policy that runs another one (re-exported
by :mod:`kernelpro.api`)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from kernelpro.api import SearchPolicy


def build_search_policy(name: str, params: Mapping[str, Any] | None = None, seed: int = 0,
                        where: str = "policy_params", name_where: str = "policy") -> "SearchPolicy":
    """A registered search policy ``name`` with ``params`` validated by its ``Settings``, for a
    policy that delegates to another (the energy plugin's two-phase search runs the
    configured one for speed first). Raises ``ValueError`` with one line for an unknown
    name (starting with ``name_where``, the config key of the name) or a bad parameter
    (starting with ``where``, the key of the parameters)."""
    from kernelpro.config import ConfigError, plugin_settings
    from kernelpro.plugins import PluginError, installed

    try:
        cls = installed().search_policy(name)
    except PluginError as exc:
        raise ValueError(f"{name_where}: {exc}") from None
    try:
        settings = plugin_settings(cls, dict(params or {}), where)
    except ConfigError as exc:
        raise ValueError("; ".join(exc.problems)) from None
    return cls(settings, rng=random.Random(seed))
