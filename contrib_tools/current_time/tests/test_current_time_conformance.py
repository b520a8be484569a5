"""The conformance kit's checks for the harness-one-current-time distribution."""

from harness_one.testing import ToolPackageTests


class TestCurrentTimeConformance(ToolPackageTests):
    distribution = "harness-one-current-time"
