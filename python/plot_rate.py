"""Plot a multicast's sending rate over time per CNP policy (rocast sim --preset

A command-line shim: the code is rocast.plot.tmcf_rate (python/rocast/plot/tmcf_rate.py).
Usage: plot_rate.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.tmcf_rate import main

if __name__ == "__main__":
    sys.exit(main())
