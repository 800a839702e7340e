"""Cepheus Fig. 10 in the paper's form, from `rocast sim --preset cepheus-fig10`'s

A command-line shim: the code is rocast.plot.cepheus_fig10 (python/rocast/plot/cepheus_fig10.py).
Usage: plot_fig10.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.cepheus_fig10 import main

if __name__ == "__main__":
    sys.exit(main())
