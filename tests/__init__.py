from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent  # the git checkout the tests run from
