"""`python -m accelbench ...`, and so `torchrun ... -m accelbench ...`: the accelbench command."""

import sys

from accelbench.cli import interrupt

interrupt.install()  # first of all: a Ctrl-C while the commands import is one line too
try:
    from accelbench.cli.main import main
except KeyboardInterrupt:
    print("interrupted by SIGINT", file=sys.stderr)
    interrupt.end_now(130)

if __name__ == "__main__":
    main()
