"""Plot Cepheus' fairness experiment (rocast sim --preset cepheus-fairness).

A command-line shim: the code is rocast.plot.cepheus_fig14 (python/rocast/plot/cepheus_fig14.py).
Usage: plot_fairness.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.cepheus_fig14 import main

if __name__ == "__main__":
    sys.exit(main())
