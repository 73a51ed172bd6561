"""The demo's body scene (``scripts/demo.py``, issue 22): Rigify's human metarig posed by a body solve.

Issue 22's five goals (both ankles, both wrists, the top of the head; ``compare_body``'s set-up: the
hips ``spine`` as body root, priorities feet 2 > head 1 > hands 0) at the peak of its ``reach`` path,
the head leaning into the reach and the left hand's goal ``FAR`` further out: farther than the body
can lean with its feet planted, so that goal stays short (limited) while the others are met. One
``ik_solvers.solve(all_chains=True)`` poses the body; the picture is drawn from Blender's evaluation
of the solved pose (every bone, the rest pose faint behind it), each goal with the status, error and
bound the solve stored on its chain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from compare_body import BODY_ROOT, GOALS, BodySetup, add_ours

FRAMES_PER_PATH = 9
"""Frames per path of ``compare_body``'s set-up (odd: the middle frame is a path's peak)."""
PEAK_FRAME = FRAMES_PER_PATH + FRAMES_PER_PATH // 2 + 1
"""The ``reach`` path (the second) at its peak."""
FAR = np.array([0.0, -0.4, 0.0])
"""How much further the left hand's goal is put (m; forward is −y): out of the planted body's reach."""


def bone_points(rig: Any) -> np.ndarray:
    """Every bone's evaluated head and tail in the world ``(B, 2, 3)``."""
    world = np.array(rig.matrix_world)
    points = np.array([[bone.head[:], bone.tail[:]] for bone in rig.pose.bones])
    return points @ world[:3, :3].T + world[:3, 3]


def pose_body() -> dict[str, Any]:
    """Build the scene, solve the body at ``PEAK_FRAME``; the rest and solved bones, goals and outcomes."""
    import bpy

    setup = BodySetup(FRAMES_PER_PATH)
    add_ours(setup)
    rig, scene, view_layer = setup.rig, bpy.context.scene, bpy.context.view_layer
    assert scene is not None and view_layer is not None  # the set-up's scene
    scene.frame_set(PEAK_FRAME)
    hand = setup.targets["wrist.L"]
    far = np.array(hand.matrix_world.translation) + FAR
    hand.animation_data_clear()  # the one goal moved by hand: held there, not by its keys
    hand.location = far.tolist()
    view_layer.update()
    rest = bone_points(rig)
    hips = np.array(rig.pose.bones[BODY_ROOT].head)
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        assert bpy.ops.ik_solvers.solve(all_chains=True) == {"FINISHED"}  # type: ignore[attr-defined]  # an operator registered at runtime
    view_layer.update()
    chains = rig.ik_solvers.chains
    goals = {goal: {"position": np.array(setup.targets[goal].matrix_world.translation),
                    "bones": setup.chains[goal], "status": chains[goal].last_goal_status,
                    "error": float(chains[goal].last_error), "bound": float(chains[goal].last_lower_bound),
                    "priority": int(chains[goal].priority)} for goal in GOALS}
    return {"rest": rest, "posed": bone_points(rig), "names": [b.name for b in rig.pose.bones], "goals": goals,
            "hips_moved": float(np.linalg.norm(np.array(rig.pose.bones[BODY_ROOT].head) - hips))}


def outcomes(posed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per goal, for the demo's report: priority, status, error and bound (mm)."""
    return {goal: {"priority": g["priority"], "status": g["status"], "error_mm": round(g["error"] * 1000, 4),
                   "bound_mm": round(g["bound"] * 1000, 4)} for goal, g in posed["goals"].items()}


def millimetres(metres: float) -> str:
    """A goal's error or bound for the picture: mm to 3 digits, or below the 0.001 mm the solve resolves."""
    return "< 0.001 mm" if metres < 1e-6 else f"{metres * 1000:.3g} mm"


def plot_body(path: Path, posed: dict[str, Any]) -> None:
    """Front (x–z) and side (y–z) views: the rest pose faint, the solved bones, each chain in its colour,
    each goal a cross labelled with its status and error."""
    import matplotlib.pyplot as plt

    index = {name: k for k, name in enumerate(posed["names"])}
    fig, axes = plt.subplots(1, 2, figsize=(11, 7.5))
    for ax, (axis, label, title) in zip(axes, ((0, "x (m)", "front (x–z)"), (1, "y (m), forward is −y", "side (y–z)"))):
        for bones, color, width in ((posed["rest"], "0.85", 1.0), (posed["posed"], "0.45", 1.5)):
            for head, tail in bones:
                ax.plot([head[axis], tail[axis]], [head[2], tail[2]], color=color, lw=width, zorder=1)
        for k, (goal, g) in enumerate(posed["goals"].items()):
            color = f"C{k}"
            chain = posed["posed"][[index[b] for b in g["bones"]]]
            joints = np.vstack([chain[:, 0], chain[-1:, 1]])
            ax.plot(joints[:, axis], joints[:, 2], "-o", color=color, lw=2.5, ms=3, zorder=2)
            ax.plot(g["position"][axis], g["position"][2], "x", color=color, ms=10, mew=2.5, zorder=3)
            if axis == 0:
                status = g["status"].lower().replace("_", " ")
                text = f"{goal} (priority {g['priority']}): {status}, error {millimetres(g['error'])}"
                if g["status"] != "REACHED":
                    text += f", bound {millimetres(g['bound'])}"
                ax.plot([], [], "x", color=color, ms=8, mew=2, label=text)
        ax.set_aspect("equal")
        ax.set_xlabel(label)
        ax.set_ylabel("z (m)")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    fig.subplots_adjust(left=0.07, right=0.98, top=0.9, bottom=0.2, wspace=0.25)
    fig.legend(loc="lower center", bbox_to_anchor=(0.5, 0.01), ncol=2, fontsize=8.5, frameon=False)
    fig.suptitle("Body solve on Rigify's human metarig: five goals (×), the hips as body root "
                 f"(moved {posed['hips_moved'] * 100:.1f} cm); rest pose in light grey", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)
