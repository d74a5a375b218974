"""``python -m gangway_cli``: the same program as the ``gangway`` console script."""

from gangway_cli.main import main

if __name__ == "__main__":
    main()
