"""`python -m searchbox.index build|refresh|search|doctor|bench ...`: the persistent index (searchbox.retrieval.index.cli)."""

import sys

if __name__ == "__main__":
    from searchbox.model.threads import preset_blas_env

    preset_blas_env()  # before numpy and torch load their pools
    from searchbox.retrieval.index.cli import main

    sys.exit(main())
