"""python -m megatrain [options] script.py [args...]: megatrain-run."""
import sys

from .run import main

sys.exit(main())
