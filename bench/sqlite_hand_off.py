"""What one hand-off to aiosqlite's thread costs: CPU time (both threads) and wall time per call of a no-op
``commit`` on an in-memory database, on uvloop, the median of ``--rounds``. SQLAlchemy's aiosqlite adapter makes
three or four such hand-offs per statement (``bench/profile_pipeline.py --statements`` counts them per request).

    .venv/bin/python bench/sqlite_hand_off.py [--calls 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import aiosqlite
import uvloop


async def measure(calls: int, rounds: int) -> tuple[float, float]:
    cpu_us: list[float] = []
    wall_us: list[float] = []
    async with aiosqlite.connect(":memory:") as db:
        for _ in range(1000):  # warm-up
            await db.commit()
        for _ in range(rounds):
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(calls):
                await db.commit()
            cpu_us.append((time.process_time() - cpu) / calls * 1e6)
            wall_us.append((time.perf_counter() - wall) / calls * 1e6)
    return statistics.median(cpu_us), statistics.median(wall_us)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cpu, wall = uvloop.run(measure(args.calls, args.rounds))
    print(f"one hand-off to aiosqlite's thread: {cpu:.1f} µs of CPU, {wall:.1f} µs of wall time "
          f"(median of {args.rounds} rounds of {args.calls:,})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
