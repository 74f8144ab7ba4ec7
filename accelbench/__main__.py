"""`python -m accelbench ...`, and so `torchrun ... -m accelbench ...`: the accelbench command."""

from accelbench.cli.main import main

if __name__ == "__main__":
    main()
