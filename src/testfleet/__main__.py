"""``python -m testfleet``: the same entry point as the ``testfleet`` script, for
environments where the script directory is not on PATH (containers, ``pipx run``)."""

from testfleet.cli.main import main

if __name__ == "__main__":
    main()
