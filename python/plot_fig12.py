"""Cepheus Fig. 12 in the paper's form, from `rocast sim --preset cepheus-fig12`'s

A command-line shim: the code is rocast.plot.cepheus_fig12 (python/rocast/plot/cepheus_fig12.py).
Usage: plot_fig12.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.cepheus_fig12 import main

if __name__ == "__main__":
    sys.exit(main())
