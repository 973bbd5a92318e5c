import gc
import sys

# Start-up and exit costs, measured on `dram` (about 0.2 s of a 1.2 s run): the imports make
# long-lived objects only, so the cyclic collector has nothing to find in them, and at exit
# it would walk every object numba created before the process ends anyway.
gc.disable()
from simulator.cli import main  # noqa: E402

gc.enable()
gc.freeze()
rc = main()
gc.freeze()
sys.exit(rc)
