"""``python -m proclab ...`` (and ``torchrun -m proclab ...``) run the CLI."""

from proclab.cli import main

main()
