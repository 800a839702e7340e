"""Plot PEEL's offline motivation figures (rocast sim --preset peel-fig1 | peel-fig3).

A command-line shim: the code is rocast.plot.peel_static (python/rocast/plot/peel_static.py).
Usage: plot_peel_static.py DATA.csv OUT.png "title" (writes OUT.png and OUT.svg).
"""

import sys

from rocast.plot.peel_static import main

if __name__ == "__main__":
    sys.exit(main())
