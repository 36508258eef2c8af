import sys

from backfill.cli import main

sys.exit(main())
