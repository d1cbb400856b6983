"""What a test needs from the machine, under the CI policy: a missing tool or package skips
the test with the install command, except under CI=true, where it fails the test (a CI run
that silently skipped its Spark or RGW tests would look green while proving nothing)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def strict() -> bool:
    """True under CI=true: everything the suite needs must be there."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def missing(reason: str) -> None:
    """Skip with ``reason``, or fail under CI=true (one line, usable at module level)."""
    if strict():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def need_module(name: str, install: str = "pip install -e '.[dev,spark]'") -> ModuleType:
    """``import name``; when it fails, :func:`missing` names the package and how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"{name} cannot be imported ({exc}); install it: {install}")
        raise  # not reached: missing() raises
