"""Plot Cepheus Figs 8-9 (rocast sim --preset cepheus-testbed).

A command-line shim: the code is rocast.plot.cepheus_testbed (python/rocast/plot/cepheus_testbed.py).
Usage: plot_cepheus_testbed.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.cepheus_testbed import main

if __name__ == "__main__":
    sys.exit(main())
