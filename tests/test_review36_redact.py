"""Review 36, command lines in text: mysql's attached ``-p<password>`` is masked after the database named before it
(``mysqldump shop -uroot -p...``), and a secret-named variable given to ``docker run -e``/``--env`` hides its value."""

from __future__ import annotations

import pytest

from harness_one import Redactor
from harness_one._redact import _SHOWN, REDACTED, mask_secrets


def _all_ways(text: str) -> list[str]:
    """``text`` as logs, errors the model reads and what a person is shown mask it."""
    return [Redactor().text(text), mask_secrets(text), _SHOWN.mask(text)]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("docker run -e API_KEY=Zq7dk image", f"docker run -e API_KEY={REDACTED} image"),
        ("docker run --env API_KEY=Zq7dk image", f"docker run --env API_KEY={REDACTED} image"),
        ("docker run --env=API_KEY=Zq7dk image", f"docker run --env=API_KEY={REDACTED} image"),
        ('docker run -e "PASSWORD=Zq7dk" image', f'docker run -e "PASSWORD={REDACTED}" image'),
        ("docker run -e PGPASSWORD=Zq7dk image", f"docker run -e PGPASSWORD={REDACTED} image"),
        ("docker run -e DEBUG=1 image", "docker run -e DEBUG=1 image"),
    ],
)
def test_a_secret_variable_given_to_docker_run_hides_its_value(text: str, shown: str) -> None:
    assert _all_ways(text) == [shown] * 3


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("mysql shop -pZq7my", f"mysql shop -p{REDACTED}"),
        ("mysqldump shop -uroot -pZq7my > shop.sql", f"mysqldump shop -uroot -p{REDACTED} > shop.sql"),
        ("mysql -u root shop -pZq7my", f"mysql -u root shop -p{REDACTED}"),
        ("mysql -h db -P 3306 shop -u root -pZq7my", f"mysql -h db -P 3306 shop -u root -p{REDACTED}"),
        (
            "Command '['mysqldump', 'shop', '-pZq7my']' returned non-zero exit status 2.",
            f"Command '['mysqldump', 'shop', '-p{REDACTED}']' returned non-zero exit status 2.",
        ),
        ("mysql shop -p'Zq7 my'", f"mysql shop -p'{REDACTED}'"),
    ],
)
def test_a_mysql_password_after_the_database_is_masked(text: str, shown: str) -> None:
    assert _all_ways(text) == [shown] * 3


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("mysql -uroot -pZq7my db", f"mysql -uroot -p{REDACTED} db"),
        ("mysql --password=Zq7my db", f"mysql --password={REDACTED} db"),
        ("mysql --password Zq7my", f"mysql --password {REDACTED}"),
    ],
)
def test_mysql_passwords_before_the_database_stay_masked(text: str, shown: str) -> None:
    assert _all_ways(text) == [shown] * 3


@pytest.mark.parametrize(
    "text",
    [
        "mysql shop -p",  # -p alone asks for the password; the word before it is the database
        "mysql -u root shop -p",
        "mysql shop -p 3306",
        "ran mysql on db1 then postgres with -p5432",  # prose: more than one word that is no flag
        "mysql shop; ssh -p2222 host",  # the next command's -p
        "mysql shop | grep -pattern",
    ],
)
def test_words_that_are_no_mysql_password_stay(text: str) -> None:
    assert _all_ways(text) == [text] * 3
