from __future__ import annotations

from datetime import UTC, datetime

import harness_one_current_time as mod
import pytest

from harness_one import ToolArgumentError, ToolRegistry


@pytest.fixture
def reg(monkeypatch: pytest.MonkeyPatch) -> ToolRegistry:
    monkeypatch.setattr(mod, "_utcnow", lambda: datetime(2024, 7, 1, 12, 30, 15, tzinfo=UTC))
    registry = ToolRegistry(autoload=False)
    registry.add(mod.current_time)
    return registry


def test_zones_and_formats(reg: ToolRegistry) -> None:
    assert reg.call("current_time", {}) == {"timezone": "UTC", "time": "2024-07-01T12:30:15+00:00", "utc_offset": "+00:00"}
    moscow = reg.call("current_time", {"timezone": "Europe/Moscow"})
    assert moscow == {"timezone": "Europe/Moscow", "time": "2024-07-01T15:30:15+03:00", "utc_offset": "+03:00"}
    assert reg.call("current_time", {"timezone": "America/New_York", "format": "unix"})["time"] == 1719837015.0
    assert reg.call("current_time", {"format": "rfc2822"})["time"] == "Mon, 01 Jul 2024 12:30:15 +0000"
    assert (
        reg.call("current_time", {"timezone": "Asia/Kolkata", "format": "human"})["time"] == "Monday, 01 July 2024, 18:00:15 IST"
    )


def test_unknown_zone_is_an_argument_error(reg: ToolRegistry) -> None:
    with pytest.raises(ToolArgumentError) as err:
        reg.call("current_time", {"timezone": "Europe/Moskow"})
    assert "$.timezone" in str(err.value) and "'Europe/Moskow'" in str(err.value) and "Europe/Moscow" in str(err.value)


def test_bad_format_is_refused_by_the_schema(reg: ToolRegistry) -> None:
    with pytest.raises(ToolArgumentError, match=r"\$\.format"):
        reg.call("current_time", {"format": "klingon"})


def test_found_through_its_entry_point() -> None:
    reg = ToolRegistry(discover=True, autoload=False)
    assert reg.get("current_time").source == "harness-one-current-time"


def test_a_huge_unknown_zone_is_not_echoed_whole(reg: ToolRegistry) -> None:
    with pytest.raises(ToolArgumentError) as err:
        reg.call("current_time", {"timezone": "Europe/" + "x" * 200_000})  # under the payload limit
    problem = err.value.problems[0]
    assert len(str(err.value)) < 400 and "(200007 characters)" in problem.message and problem.path == "$.timezone"


@pytest.mark.parametrize("name", ["localtime", "Factory", "posixrules"])
def test_names_that_are_not_zones_are_refused(reg: ToolRegistry, name: str) -> None:
    with pytest.raises(ToolArgumentError, match="unknown time zone"):  # "localtime" told this machine's zone
        reg.call("current_time", {"timezone": name})


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("utc", "did you mean UTC?"),  # was no suggestion
        ("europe/berlin", "did you mean Europe/Berlin?"),  # was three, Berlin among them
        ("PST", "did you mean America/Los_Angeles?"),  # was "did you mean MST, HST, EST?"
        ("pdt", "did you mean America/Los_Angeles?"),
        ("CEST", "did you mean CET?"),
        ("IST", "did you mean Asia/Kolkata, Europe/Dublin, Asia/Jerusalem?"),  # ambiguous: every usual meaning
        ("UTC+3", "did you mean Etc/GMT-3? (an Etc/GMT name has the POSIX sign: Etc/GMT-3 is 3 hours ahead of UTC)"),
        ("gmt-05:00", "did you mean Etc/GMT+5? (an Etc/GMT name has the POSIX sign: Etc/GMT-3 is 3 hours ahead of UTC)"),
        ("UTC+5:30", "use an IANA name such as 'Europe/Berlin'"),  # no zone is that offset alone
        ("Etc/GMT+14", "use an IANA name such as 'Europe/Berlin'"),  # was Etc/GMT+4, Etc/GMT+1, Etc/GMT-14 (14 h ahead)
        ("etc/gmt+03", "did you mean Etc/GMT+3? (an Etc/GMT name has the POSIX sign: Etc/GMT-3 is 3 hours ahead of UTC)"),
        ("Etc/GMT-10:00", "did you mean Etc/GMT-10? (an Etc/GMT name has the POSIX sign: Etc/GMT-3 is 3 hours ahead of UTC)"),
        ("XYZT", "use an IANA name such as 'Europe/Berlin'"),  # another abbreviation is no guess
        ("Tokyo", "did you mean Asia/Tokyo?"),
        ("Paris", "did you mean Europe/Paris?"),  # a city is the last part of its zone's name (was no suggestion)
        ("PARIS", "did you mean Europe/Paris?"),
        ("new york", "did you mean America/New_York?"),  # was no suggestion
        ("Asia/Paris", "did you mean Europe/Paris?"),  # the city, in another region
        ("istanbul", "did you mean Asia/Istanbul, Europe/Istanbul?"),  # every zone of that city
        ("Lima", "did you mean America/Lima?"),  # a short name: a city, not another abbreviation
    ],
)
def test_suggestions_ignore_case_and_read_abbreviations(reg: ToolRegistry, name: str, suggested: str) -> None:
    with pytest.raises(ToolArgumentError) as err:
        reg.call("current_time", {"timezone": name})
    assert err.value.problems[0].message == f"unknown time zone {name!r}; {suggested}"


def test_every_abbreviation_names_zones_and_is_not_one() -> None:
    for abbreviation, zones in mod._ABBREVIATIONS.items():
        assert abbreviation not in mod._zones() and set(zones) <= mod._zones(), abbreviation
