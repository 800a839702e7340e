"""Plot `rocast bcast`'s latency table (rocast bcast --plot).

A command-line shim: the code is rocast.plot.bcast (python/rocast/plot/bcast.py).
Usage: plot_bcast.py bcast.csv OUT.png ["title"] (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.bcast import main

if __name__ == "__main__":
    sys.exit(main())
