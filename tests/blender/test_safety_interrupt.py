"""Issue 21: a Ctrl-C that lands in a handler Blender calls while a bake evaluates a frame (Blender
prints and swallows what a handler raises) stops the bake: nothing keyed, the pose and frame put
back, and the KeyboardInterrupt propagates — before, the bake completed."""

from __future__ import annotations

import os
import signal

import bpy
import pytest
from conftest import add_empty, build_arm, pose_snapshot

from ik_solvers.blender import live
from ik_solvers.blender.bake import BakeJob, BakeOptions


def evaluated_arm_bake():
    """The arm with a keyed armature transform, so every frame is sampled by evaluating it."""
    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    for frame, x in ((1, 0.4), (20, 0.3)):
        target.location.x = x
        target.keyframe_insert("location", frame=frame)
    obj.keyframe_insert("location", frame=1)
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Arm", "forearm", 2, target, "SDLS"
    bpy.context.view_layer.objects.active = obj
    bpy.context.scene.frame_set(1)
    return obj


def fcurve_count(obj):
    return sum(len(bag.fcurves) for layer in obj.animation_data.action.layers for strip in layer.strips
               for bag in strip.channelbags)


def interrupt_at_frame(frame):
    """A frame-change handler that gets Ctrl-C (a real SIGINT) at ``frame``."""
    def handler(scene, *_):
        if scene.frame_current == frame:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the signal lands here, inside the handler
                pass
    return handler


@pytest.fixture
def sigint_in_a_handler():
    handler = interrupt_at_frame(7)
    bpy.app.handlers.frame_change_post.append(handler)
    try:
        yield
    finally:
        bpy.app.handlers.frame_change_post.remove(handler)


def test_a_sigint_landing_in_a_frame_change_handler_stops_the_bake_job(addon, sigint_in_a_handler):
    obj = evaluated_arm_bake()
    before, curves = pose_snapshot(obj), fcurve_count(obj)
    job = BakeJob(bpy.context, obj, BakeOptions(1, 20, 1, ("Arm",)))
    with pytest.raises(KeyboardInterrupt):
        job.advance()
    assert fcurve_count(obj) == curves and pose_snapshot(obj) == before
    assert bpy.context.scene.frame_current == 1


def test_a_keyboard_interrupt_in_our_frame_change_handler_stops_the_batch_steps(addon, monkeypatch):
    """The batch's steps (sample, write_solved) too, and the interrupt in live mode's own handler."""
    obj = evaluated_arm_bake()
    job = BakeJob(bpy.context, obj, BakeOptions(1, 20, 1, ("Arm",)))
    calls = []

    def interrupted(*_args, **_kwargs):
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(live, "update_live_chains", interrupted)
    with pytest.raises(KeyboardInterrupt):
        job.sample(job.chains[0])
    assert calls and bpy.context.scene.frame_current == 1


def test_the_bake_operator_stops_with_one_sentence_and_nothing_keyed(addon, sigint_in_a_handler):
    """An operator cannot pass a KeyboardInterrupt on (``bpy.ops`` turns it into a RuntimeError with
    a traceback): it reports the interruption in one sentence, with everything put back."""
    obj = evaluated_arm_bake()
    before, curves = pose_snapshot(obj), fcurve_count(obj)
    with pytest.raises(RuntimeError, match=r"^Error: Bake interrupted \(Ctrl-C\); the action is as it was\.$"):
        bpy.ops.ik_solvers.bake(frame_start=1, frame_end=20)
    assert fcurve_count(obj) == curves and pose_snapshot(obj) == before
    assert obj.ik_solvers.chains[0].last_bake_report == ""
