"""Plot PEEL's Figs 5-7 (rocast sim --preset peel-fig5 | peel-fig6 | peel-fig7).

A command-line shim: the code is rocast.plot.peel (python/rocast/plot/peel.py).
Usage: plot_peel.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.peel import main

if __name__ == "__main__":
    sys.exit(main())
