"""Draws one of rocast's figures from its CSV: `plot.py FIGURE DATA.csv OUT.png [TITLE]`
writes OUT.png and OUT.svg (FIGURE: a module of rocast.plot, e.g. peel, cepheus_fig12).
What `rocast sim`, `rocast bcast --plot` and the lab benchmarks run; the code is
python/rocast/plot/.
"""

import sys

from rocast.plot._cli import main

if __name__ == "__main__":
    sys.exit(main())
