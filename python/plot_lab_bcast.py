"""Plot broadcast on real packets (rocast bench lab-bcast).

A command-line shim: the code is rocast.plot.lab_bcast (python/rocast/plot/lab_bcast.py).
Usage: plot_lab_bcast.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.lab_bcast import main

if __name__ == "__main__":
    sys.exit(main())
