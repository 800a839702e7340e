"""Cepheus Fig. 11b in the paper's form, from `rocast sim --preset cepheus-fig11`'s

A command-line shim: the code is rocast.plot.cepheus_fig11 (python/rocast/plot/cepheus_fig11.py).
Usage: plot_fig11.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.cepheus_fig11 import main

if __name__ == "__main__":
    sys.exit(main())
