"""`python -m sim` runs the kernelsim command line."""

from sim.cli import main

raise SystemExit(main())
