"""``python -m harness_one`` runs the ``harness-one`` command line."""

from ._cli import main

main(prog_name="harness-one")
