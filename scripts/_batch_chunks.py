"""Frame chunks of a batch bake and their share-out to worker processes (``ik_batch --jobs``).

A chunk is a function of the frames alone, so any ``--jobs`` gives the same chunks and, every frame
being solved from the chain's reference pose, the same keys.
"""

from __future__ import annotations

import numpy as np


def plan_chunks(frames: np.ndarray, chunk_size: int) -> list[np.ndarray]:
    """Consecutive runs of at most ``chunk_size`` of ``frames``: a function of the frames alone."""
    return [frames[i:i + chunk_size] for i in range(0, len(frames), chunk_size)]


def assign_chunks(count: int, jobs: int) -> list[list[int]]:
    """Chunk indices per worker, round robin (worker w gets w, w + jobs, ...); empty workers dropped."""
    return [list(range(w, count, jobs)) for w in range(min(jobs, count))]
