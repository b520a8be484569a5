"""The conformance kit's checks for the harness-one-fetch-url distribution."""

from harness_one.testing import ToolPackageTests


class TestFetchUrlConformance(ToolPackageTests):
    distribution = "harness-one-fetch-url"
    has_side_effects = True  # it fetches from the network: examples are validated, not run
