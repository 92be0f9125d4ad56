"""``python -m advsim …``: the ``advsim`` command where its console script is not installed
(a machine that only has the checkout on ``PYTHONPATH``)."""

from advsim.cli import main

if __name__ == "__main__":
    main()
