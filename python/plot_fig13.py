"""Cepheus Fig. 13 in the paper's form, from `rocast sim --preset cepheus-loss`'s

A command-line shim: the code is rocast.plot.cepheus_fig13 (python/rocast/plot/cepheus_fig13.py).
Usage: plot_fig13.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.cepheus_fig13 import main

if __name__ == "__main__":
    sys.exit(main())
