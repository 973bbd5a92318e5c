import gc
import sys

try:
    # Start-up and exit costs, measured on `dram` (about 0.2 s of a 1.2 s run): the imports
    # make long-lived objects only, so the cyclic collector has nothing to find in them, and
    # at exit it would walk every object numba created before the process ends anyway.
    gc.disable()
    from simulator.cli import main

    gc.enable()
    gc.freeze()
    rc = main()
    gc.freeze()
except KeyboardInterrupt:  # (main says so itself once it runs; this is Ctrl-C while importing)
    print("interrupted", file=sys.stderr)
    rc = 130
sys.exit(rc)
