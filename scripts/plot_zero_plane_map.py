"""Draw the HI solver's default zero-plane map on its sphere (SPEC §5) → ``DIR/hi-default-map.png``.

Left: the sphere of EE-axis directions with the zero-plane normal drawn at sample points, the
equator (the preferred plane, rule A: normal = n0), the zero meridian a0 and the poles ±n0.
Right: the northern hemisphere seen from above the pole: every meridian carries n0 up to the
pole (rule B), so the normals arriving from opposite sides point opposite ways — the flip.

    .venv/bin/python scripts/plot_zero_plane_map.py [--out DIR]      (default DIR: docs)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _cli import Parser, run_main

from ik_solvers.core.zero_plane import DefaultZeroPlaneMap

A0 = np.array([1.0, 0.0, 0.0])
N0 = np.array([0.0, 0.0, 1.0])


def sphere_points(n_latitudes: int = 9, n_longitudes: int = 16) -> np.ndarray:
    """Unit vectors on a latitude/longitude grid, poles excluded (the map is singular there)."""
    latitudes = np.radians(np.linspace(-80.0, 80.0, n_latitudes))
    longitudes = np.radians(np.arange(n_longitudes) * 360.0 / n_longitudes)
    lat, lon = np.meshgrid(latitudes, longitudes)
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1).reshape(-1, 3)


def draw(out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    zero_map = DefaultZeroPlaneMap(A0, N0)
    figure = plt.figure(figsize=(12, 5.6))

    ax = figure.add_subplot(1, 2, 1, projection="3d")
    u, v = np.mgrid[0 : 2 * np.pi : 40j, 0 : np.pi : 20j]
    ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", linewidth=0.5)
    points = sphere_points()
    normals = zero_map(points)
    ax.quiver(*points.T, *normals.T, length=0.25, color="tab:blue", linewidth=0.8, normalize=True)
    t = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(t), np.sin(t), 0 * t, color="tab:green", linewidth=2, label="equator: preferred plane (normal n0)")
    ax.plot(np.cos(t), 0 * t, np.sin(t), color="tab:orange", linewidth=1.5, label="zero meridian through a0")
    ax.quiver(0, 0, 0, *A0, color="tab:orange", linewidth=2)
    ax.scatter([0, 0], [0, 0], [1, -1], color="tab:red", s=60, depthshade=False, label="poles ±n0 (singular)")
    ax.text(1.1, 0, 0, "a0")
    ax.text(0, 0, 1.15, "+n0")
    ax.text(0, 0, -1.3, "−n0")
    ax.set_box_aspect((1, 1, 1))
    ax.set_axis_off()
    ax.set_title("Default zero-plane map: normal n(a) at EE axis a")
    ax.legend(loc="lower left", fontsize=8)

    ax = figure.add_subplot(1, 2, 2)
    latitudes = np.radians(np.array([30.0, 50.0, 65.0, 75.0, 82.0, 87.0]))
    longitudes = np.radians(np.arange(24) * 15.0)
    lat, lon = np.meshgrid(latitudes, longitudes)
    axes = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1).reshape(-1, 3)
    normals = zero_map(axes)
    # Azimuthal view from above +n0: a point at colatitude c sits at radius c (degrees).
    colatitude = np.degrees(np.arccos(axes[:, 2]))
    longitude = np.arctan2(axes[:, 1], axes[:, 0])
    x, y = colatitude * np.cos(longitude), colatitude * np.sin(longitude)
    ax.quiver(x, y, normals[:, 0], normals[:, 1], color="tab:blue", scale=18, width=0.004)
    ring = np.linspace(0, 2 * np.pi, 200)
    ax.plot(90 * np.cos(ring), 90 * np.sin(ring), color="tab:green", label="equator (90° from the pole)")
    ax.plot(10 * np.cos(ring), 10 * np.sin(ring), color="tab:red", linestyle="--", label="10° pole warning")
    ax.scatter([0], [0], color="tab:red", s=60, zorder=3, label="pole +n0: normals flip here")
    ax.annotate("a0", (62, 0), color="tab:orange")
    ax.set_aspect("equal")
    ax.set_xlim(-100, 100)
    ax.set_ylim(-100, 100)
    ax.set_xlabel("degrees from the pole, toward a0")
    ax.set_title("Seen from above +n0: horizontal part of n(a)")
    ax.legend(loc="lower left", fontsize=8)

    out.mkdir(parents=True, exist_ok=True)
    path = out / "hi-default-map.png"
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> int:
    return run_main("plot_zero_plane_map.py", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = Parser(prog="plot_zero_plane_map.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs"), help="output folder (default: docs)")
    args = parser.parse_args(argv)
    print(draw(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
