"""Error context added once (issue 19): ``errors.chain_context`` names the chain and frame of the error
raised inside, where the chain's work starts, and keeps the error itself (its traceback and cause)
instead of re-raising a copy ``from None`` at every layer."""

from __future__ import annotations

import bpy
import pytest
from conftest import add_empty, build_arm

from ik_solvers.blender.errors import IKSolversError, chain_context
from ik_solvers.core import IKInputError


def test_chain_context_names_the_error_it_lets_through_the_innermost_first():
    cause = ValueError("deep down")
    with pytest.raises(IKSolversError) as raised:
        with chain_context("Outer"), chain_context("Inner", frame=7):
            try:
                raise cause
            except ValueError as error:
                raised_here = IKSolversError("the thing failed.", field="thing")
                raise raised_here from error
    assert raised.value is raised_here and raised.value.__cause__ is cause and raised.value.field == "thing"
    assert str(raised.value) == "Chain 'Inner' at frame 7: the thing failed."


def test_a_bakes_refused_solve_names_chain_and_frame_once_and_keeps_the_cores_error(addon):
    from ik_solvers.blender.bake import BakeJob, BakeOptions
    from ik_solvers.blender.chains import capture_preferred_pose

    obj = build_arm()
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.method = "Arm", "forearm", 2, "HI"
    chain.target = add_empty(location=(0.3, 0.2, 1.3))
    capture_preferred_pose(obj, chain, bpy.context.scene)
    obj.pose.bones["upper_arm"].lock_ik_x = obj.pose.bones["upper_arm"].lock_ik_y = True  # HI refuses a hinge
    job = BakeJob(bpy.context, obj, BakeOptions(3, 6, 1, ("Arm",)))
    with pytest.raises(IKSolversError) as raised:
        job.advance()
    job.cancel()
    error = raised.value
    assert str(error).startswith("Chain 'Arm' at frame 3: the solver refused the input: ")
    assert str(error).count("Arm") == 1 and "ball start joint" in str(error)
    assert isinstance(error.__cause__, IKInputError) and error.field == error.__cause__.field == "kinds"
    frames = [code.co_name for code in _traceback_frames(error)]
    assert "run_solve" in frames and "solve" in frames  # where it was raised, through the bake's step


def _traceback_frames(error: BaseException):
    tb = error.__traceback__
    while tb is not None:
        yield tb.tb_frame.f_code
        tb = tb.tb_next
