"""What building a dishka container costs: the HTTP app's (``http_container``, once per ``parley serve`` process and
once per HTTP test) and the CLI's and worker's (``build_container``, once per command, worker and many tests), in
CPU time of this process: the median of ``--repeat`` builds after one to warm up. The containers are built, not
entered: no database is opened.

    .venv/bin/python bench/container_build.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from entrypoints.asgi_app import http_container  # noqa: E402
from entrypoints.ioc import build_container  # noqa: E402
from entrypoints.settings import Settings  # noqa: E402


def cpu_ms(build: Callable[[Settings], Any], settings: Settings, repeat: int) -> float:
    """The median CPU time of one build, with a full collection before each (the containers are dropped)."""
    build(settings)
    times = []
    for _ in range(repeat):
        gc.collect()
        started = time.process_time()
        build(settings)
        times.append(time.process_time() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp}/parley.db", var_dir=Path(tmp),
                            secret_key="bench-secret-key")
        http = cpu_ms(http_container, settings, args.repeat)
        worker = cpu_ms(build_container, settings, args.repeat)
    print(f"dishka {version('dishka')}: http_container {http:.1f} ms, build_container {worker:.1f} ms of CPU "
          f"(median of {args.repeat})")


if __name__ == "__main__":
    main()
