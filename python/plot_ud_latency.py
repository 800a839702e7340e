"""Plot multicast latency against group size (rocast sim --preset ud-latency).

A command-line shim: the code is rocast.plot.ud_latency (python/rocast/plot/ud_latency.py).
Usage: plot_ud_latency.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.ud_latency import main

if __name__ == "__main__":
    sys.exit(main())
