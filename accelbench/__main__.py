"""`python -m accelbench ...`, and so `torchrun ... -m accelbench ...`: the accelbench command."""

import sys

try:  # importing the commands takes a second or two: Ctrl-C there is one line, not a traceback
    from accelbench.cli.main import main
except KeyboardInterrupt:
    print("interrupted by SIGINT", file=sys.stderr)
    sys.exit(130)

if __name__ == "__main__":
    main()
