"""The conformance kit's checks for the harness-one-calculate distribution."""

from harness_one.testing import ToolPackageTests


class TestCalculateConformance(ToolPackageTests):
    distribution = "harness-one-calculate"
