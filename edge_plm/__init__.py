"""edge-plm: a voice-controlled switch that learns from its owner, on the device.

Importing the package points Numba's cache of compiled kernels at a cache directory,
``$NUMBA_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/edge-plm/numba`` (``~/.cache/edge-plm/numba``),
never the installed package: files Numba wrote into ``site-packages/edge_plm/`` are not in pip's
record, so they survived an uninstall and left a half package behind that shadowed the next
install. This only works if Numba is imported after edge_plm (every edge-plm entry point is).
"""

import os

__version__ = "0.1.0"


def numba_cache_dir(env=os.environ) -> str:
    """Where the compiled kernels go unless ``NUMBA_CACHE_DIR`` says otherwise."""
    base = env.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "edge-plm", "numba")


if not os.environ.get("NUMBA_CACHE_DIR"):
    os.environ["NUMBA_CACHE_DIR"] = numba_cache_dir()
