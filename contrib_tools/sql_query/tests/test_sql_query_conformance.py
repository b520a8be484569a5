"""The conformance kit's checks for the harness-one-sql-query distribution."""

from harness_one.testing import ToolPackageTests


class TestSqlQueryConformance(ToolPackageTests):
    distribution = "harness-one-sql-query"
