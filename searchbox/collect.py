"""`python -m searchbox.collect`: a sweep folder's runs into runs/turns/tool_calls parquet (searchbox.record.collect)."""

from searchbox.record.collect import main

if __name__ == "__main__":
    from .errors import exit_process

    exit_process(main)  # errors.exit_process: no native teardown abort after the work is written
