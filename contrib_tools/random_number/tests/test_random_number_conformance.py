"""The conformance kit's checks for the harness-one-random-number distribution."""

from harness_one.testing import ToolPackageTests


class TestRandomNumberConformance(ToolPackageTests):
    distribution = "harness-one-random-number"
