"""The standard validation plugin against its contract, for each backend."""

from __future__ import annotations

from typing import Any

import pytest

from harness_one.testing import ValidationPluginContract
from harness_one_plugins import ValidationPlugin
from harness_one_plugins.validation import rust_available


class TestPythonValidation(ValidationPluginContract):
    @pytest.fixture
    def make_plugin(self) -> Any:
        return lambda: ValidationPlugin(backend="python")


@pytest.mark.skipif(not rust_available(), reason="jsonschema-rs missing")
class TestRustValidation(ValidationPluginContract):
    @pytest.fixture
    def make_plugin(self) -> Any:
        return lambda: ValidationPlugin(backend="rust")
