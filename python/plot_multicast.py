"""One multicast group, Cepheus against the application-layer overlays, from

A command-line shim: the code is rocast.plot.multicast (python/rocast/plot/multicast.py).
Usage: plot_multicast.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.multicast import main

if __name__ == "__main__":
    sys.exit(main())
