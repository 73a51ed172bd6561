"""The body solve (SPEC §8, issue 22) on a synthetic humanoid with Rigify metarig proportions.

Accuracy on random reachable goal sets, priorities with honest statuses and bounds, the root moving
only when a limb cannot reach, history independence (bit-equal rows in any batch), bend senses kept,
and continuity on a smooth crouch.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ik_solvers.core.body import GoalStatus, solve_body
from ik_solvers.core.body.forward import body_pose, body_variables
from ik_solvers.core.body.humanoid import (
    CHAIN_BONES,
    goals_of_poses,
    humanoid_body,
    humanoid_chains,
    random_goal_sets,
    random_poses,
)
from ik_solvers.core.body.model import BodyChain, BodyGoal, chain_bones
from ik_solvers.core.errors import IKInputError
from ik_solvers.core.hi import solve_hi

POSITION = 1e-5  # 0.01 mm
ANGLE = np.radians(0.05)

BODY = humanoid_body()


def _rest_goals(n: int) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    sets = random_goal_sets(BODY, 0, 1, trunk=False)
    rest = body_pose(BODY, body_variables(BODY), np.zeros((1, BODY.n_dof)))
    goals = {}
    for name, (_, tip) in CHAIN_BONES.items():
        bone = BODY.names.index(tip)
        rotation = sets.goals[name][1]
        goals[name] = (np.repeat(rest.tails(BODY, [bone])[:, 0], n, 0),
                       None if rotation is None else np.repeat(rest.frames[:, bone], n, 0))
    return goals


def _reached(result) -> np.ndarray:
    return result.all_within(POSITION, ANGLE)


def test_random_reachable_goal_sets_are_reached():
    sets = random_goal_sets(BODY, 11, 400)
    result = solve_body(BODY, humanoid_chains(sets.goals), body_root="hips")
    ok = _reached(result)
    # The bar is 99.5 % (measured on 2,000 sets by scripts/bench_body.py); 400 sets leave room for one miss.
    assert ok.mean() >= 0.995, f"{ok.mean():.2%} of the goal sets reached"
    for goal in result.goals:
        assert np.all((goal.status == GoalStatus.REACHED) == (goal.error <= 1e-6) & (
            True if goal.orientation_error is None else goal.orientation_error <= 1e-6)) or not ok.all()


def test_feet_hold_when_a_hand_is_out_of_reach():
    goals = _rest_goals(2)
    hand = goals["arm.L"][0].copy()
    hand[:, 0] += [1.5, 3.0]  # far beyond what the planted body reaches
    goals["arm.L"] = (hand, None)
    result = solve_body(BODY, humanoid_chains(goals), body_root="hips")
    for name in ("leg.L", "leg.R"):
        assert np.all(result.goal(name).error <= POSITION)
        assert np.all(result.goal(name).status == GoalStatus.REACHED)
    arm = result.goal("arm.L")
    assert np.all(np.isin(arm.status, [GoalStatus.LIMITED, GoalStatus.OUT_OF_REACH]))
    # The bound: the hand is never farther from a planted toe than the bones between them.
    rest = body_pose(BODY, body_variables(BODY), np.zeros((1, BODY.n_dof)))
    heads = {name: rest.heads[0, i] for i, name in enumerate(BODY.names)}
    tails = {name: rest.tails(BODY, [i])[0, 0] for i, name in enumerate(BODY.names)}
    up_leg = ["foot.L", "shin.L", "thigh.L"]
    up_arm = ["forearm.L", "upper_arm.L", "shoulder.L", "chest", "spine"]
    length = np.linalg.norm(tails["foot.L"] - heads["foot.L"]) + np.linalg.norm(tails["forearm.L"] - heads["forearm.L"])
    for path in (up_leg, up_arm):
        length += sum(np.linalg.norm(heads[a] - heads[b]) for a, b in zip(path, path[1:]))
    length += np.linalg.norm(heads["thigh.L"] - heads["spine"])  # both rigid in the hips' frame
    expected = np.linalg.norm(hand - goals["leg.L"][0], axis=1) - length
    assert np.all(arm.bound >= expected - 2e-6)
    assert np.all(arm.bound > 0.5) and np.all(arm.error >= arm.bound - 1e-9)
    # The other goals of lower priority than the feet still do what they can.
    assert np.all(result.goal("arm.R").error <= POSITION)


def test_fixed_root_hand_beyond_the_body_is_out_of_reach():
    """No body root, no spine chain: the arm hangs from fixed bones, so its bound is HI's own, and met."""
    goals = {"arm.L": (np.array([[5.0, 0.0, 1.4], [0.9, -0.3, 1.5]]), None)}
    result = solve_body(BODY, humanoid_chains(goals))
    arm = result.goal("arm.L")
    start = result.pose.heads[:, BODY.names.index("upper_arm.L")]
    forearm = BODY.names.index("forearm.L")
    reach = np.linalg.norm(BODY.offsets[forearm]) + np.linalg.norm(BODY.tails[forearm])
    assert np.all(arm.status == GoalStatus.OUT_OF_REACH)
    assert np.allclose(arm.bound, np.linalg.norm(goals["arm.L"][0] - start, axis=1) - reach, atol=1e-12)
    assert np.all(np.abs(arm.error - arm.bound) <= 1e-9)  # at the bound, to rounding
    assert np.all(result.root_location == 0.0)
    # With the spine a chain (its goal ignored) the arm's fixed point is the spine's head: a looser bound.
    goals["spine"] = (np.zeros((2, 3)), None)
    loose = solve_body(BODY, humanoid_chains(goals, weights={"spine": 0.0}))
    assert np.all(loose.goal("arm.L").bound < arm.bound)


@pytest.mark.parametrize("beyond", [0.25, 0.3, 0.5])
def test_feet_hold_when_a_hand_is_just_out_of_reach(beyond):
    """Where a lower goal only just cannot be met its steps are largest: they must not push the feet off."""
    goals = _reach_beyond(beyond)
    goals["arm.R"] = _rest_goals(1)["arm.R"]
    result = solve_body(BODY, humanoid_chains(goals), body_root="hips")
    for name in ("leg.L", "leg.R"):
        assert result.goal(name).error[0] <= POSITION, name
    # The hands share a priority: they compromise, or one gives way to the other; not both are met.
    hands = [result.goal(name) for name in ("arm.L", "arm.R")]
    assert not all(hand.status[0] == GoalStatus.REACHED for hand in hands)
    for hand in hands:
        assert (hand.status[0] == GoalStatus.REACHED) == (hand.error[0] <= 1e-6)


def test_root_moves_only_when_a_limb_cannot_reach():
    sets = random_goal_sets(BODY, 5, 50, trunk=False)  # hips, spine and head at rest: the limbs reach alone
    result = solve_body(BODY, humanoid_chains(sets.goals), body_root="hips")
    trunk = BODY.dofs([BODY.names.index(n) for n in ("hips", "spine", "chest", "head")])
    assert np.all(result.root_location == 0.0) and np.all(result.q[:, trunk] == 0.0)
    assert _reached(result).all()
    # A hand 10 cm beyond its straight arm, the feet planted: the chest and hips follow, just enough.
    goals = _rest_goals(1)
    del goals["spine"], goals["arm.R"]
    start = body_pose(BODY, body_variables(BODY), np.zeros((1, BODY.n_dof))).heads[0, BODY.names.index("upper_arm.L")]
    reach = float(np.linalg.norm(BODY.offsets[BODY.names.index("forearm.L")]) + BODY.tails[BODY.names.index("forearm.L")][1])
    direction = np.array([0.6, -0.8, 0.0])
    goals["arm.L"] = ((start + (reach + 0.1) * direction)[None], None)
    result = solve_body(BODY, humanoid_chains(goals), body_root="hips")
    assert _reached(result).all()
    assert np.linalg.norm(result.root_location) > 1e-3 or np.abs(result.q[:, trunk]).max() > 1e-3
    arm_start = result.pose.heads[0, BODY.names.index("upper_arm.L")]
    assert np.linalg.norm(goals["arm.L"][0][0] - arm_start) == pytest.approx(reach, abs=1e-9)  # straight, no more
    # With a reach margin the trunk carries the arm's start 1 % nearer: the elbow stays bent, the hand still reached.
    bent = solve_body(BODY, humanoid_chains(goals), body_root="hips", reach_margin=0.01)
    assert _reached(bent).all()
    bent_start = bent.pose.heads[0, BODY.names.index("upper_arm.L")]
    assert np.linalg.norm(goals["arm.L"][0][0] - bent_start) == pytest.approx(0.99 * reach, abs=1e-9)


def _reach_beyond(beyond: float) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    goals = _rest_goals(1)
    del goals["spine"], goals["arm.R"]
    start = body_pose(BODY, body_variables(BODY), np.zeros((1, BODY.n_dof))).heads[0, BODY.names.index("upper_arm.L")]
    reach = float(np.linalg.norm(BODY.offsets[BODY.names.index("forearm.L")]) + BODY.tails[BODY.names.index("forearm.L")][1])
    goals["arm.L"] = ((start + (reach + beyond) * np.array([0.6, -0.8, 0.0]))[None], None)
    return goals


def test_stiff_spine_bends_less_and_the_hips_carry_more():
    goals = _reach_beyond(0.1)
    goals["spine"] = _rest_goals(1)["spine"]  # a spine chain whose goal is ignored (weight 0): its joints free
    spine = BODY.dofs([BODY.names.index(n) for n in ("spine", "chest")])
    weights = BODY.weights.copy()
    weights[spine] = 0.05  # ik_stiffness 0.95
    stiff_body = replace(BODY, weights=weights)
    chains = humanoid_chains(goals, weights={"spine": 0.0})
    supple = solve_body(BODY, chains, body_root="hips")
    stiff = solve_body(stiff_body, chains, body_root="hips")
    for result in (supple, stiff):
        assert all(result.goal(name).error[0] <= POSITION for name in ("leg.L", "leg.R", "arm.L"))
    assert np.abs(stiff.q[0, spine]).max() < 0.5 * np.abs(supple.q[0, spine]).max()
    hips = BODY.dofs([BODY.names.index("hips")])
    assert np.linalg.norm(stiff.root_location[0]) + np.abs(stiff.q[0, hips]).max() > \
        np.linalg.norm(supple.root_location[0]) + np.abs(supple.q[0, hips]).max()


def test_bad_inputs_are_refused_naming_the_field():
    goal = BodyGoal(np.zeros((2, 3)))
    with pytest.raises(IKInputError, match="positions"):
        solve_body(BODY, [BodyChain("a", "thigh.L", "foot.L", goal), BodyChain("b", "thigh.R", "foot.R",
                                                                                 BodyGoal(np.zeros((3, 3))))])
    with pytest.raises(IKInputError, match="weight"):
        solve_body(BODY, [BodyChain("a", "thigh.L", "foot.L", BodyGoal(np.zeros((1, 3)), weight=2.0))])
    with pytest.raises(IKInputError, match="does not hang below"):
        solve_body(BODY, [BodyChain("a", "thigh.L", "foot.R", goal)])
    with pytest.raises(IKInputError, match="ball joint"):
        solve_body(BODY, [BodyChain("a", "thigh.L", "foot.L", goal)], body_root="shin.R")


def test_history_independence_bit_equal_rows():
    sets = random_goal_sets(BODY, 3, 48)
    chains = humanoid_chains(sets.goals)
    whole = solve_body(BODY, chains, body_root="hips")

    def part(rows: np.ndarray):
        goals = {k: (v[0][rows], None if v[1] is None else v[1][rows]) for k, v in sets.goals.items()}
        return solve_body(BODY, humanoid_chains(goals), body_root="hips")

    for rows in (np.arange(10, 25), np.arange(48)[::-1], np.random.default_rng(0).permutation(48), np.array([7])):
        alone = part(rows)
        assert np.array_equal(alone.q, whole.q[rows])
        assert np.array_equal(alone.root_location, whole.root_location[rows])
        for a, b in zip(alone.goals, whole.goals):
            assert np.array_equal(a.error, b.error[rows]) and np.array_equal(a.status, b.status[rows])


def _bend_signs(result) -> np.ndarray:
    signs = []
    for upper, lower in (("thigh.L", "shin.L"), ("thigh.R", "shin.R"), ("upper_arm.L", "forearm.L"),
                         ("upper_arm.R", "forearm.R")):
        a, b = BODY.names.index(upper), BODY.names.index(lower)
        frames = result.pose.frames
        u, v, axis = frames[:, a, :, 1], frames[:, b, :, 1], frames[:, b, :, 0]
        signs.append(np.arctan2(np.einsum("ij,ij->i", np.cross(u, v), axis), np.einsum("ij,ij->i", u, v)))
    return np.array(signs)


def test_no_backward_knees_or_elbows():
    sets = random_goal_sets(BODY, 9, 200)
    result = solve_body(BODY, humanoid_chains(sets.goals), body_root="hips")
    rest = solve_body(BODY, humanoid_chains(_rest_goals(1)), body_root="hips")
    rest_sign = np.sign(_bend_signs(rest)[:, 0])
    assert np.all(rest_sign != 0.0)
    # Never bent the other way; a limb the trunk stretched to its full reach may end straight (0).
    assert np.all(_bend_signs(result) * rest_sign[:, None] >= -1e-12)


def _crouch(goals: dict[str, tuple[np.ndarray, np.ndarray | None]], depth: np.ndarray) -> None:
    """The head and hands' goals taken ``depth (N,)`` down, leaning forward a little (the feet stay)."""
    for name in ("spine", "arm.L", "arm.R"):
        positions = goals[name][0].copy()
        positions[:, 2] -= depth
        positions[:, 1] -= 0.3 * depth
        goals[name] = (positions, goals[name][1])


def test_continuity_on_a_smooth_crouch():
    n = 120
    goals = _rest_goals(n)
    _crouch(goals, 0.35 * (1.0 - np.cos(np.linspace(0.0, np.pi, n))) / 2.0)  # down 35 cm, smoothly
    result = solve_body(BODY, humanoid_chains(goals), body_root="hips")
    assert _reached(result).all()
    goal_step = max(np.linalg.norm(np.diff(goals[k][0], axis=0), axis=1).max() for k in goals)
    q = result.rotations
    turn = 2.0 * np.arccos(np.clip(np.abs(np.sum(q[1:] * q[:-1], axis=2)), 0.0, 1.0))  # per bone per frame
    joint_step = max(turn.max(), np.linalg.norm(np.diff(result.root_location, axis=0), axis=1).max())
    assert joint_step <= 10.0 * goal_step, (joint_step, goal_step)
    hips = result.pose.heads[:, BODY.names.index("hips"), 2]
    assert hips[0] - hips.min() > 0.1  # the hips came down with the feet planted


@pytest.mark.parametrize("stride", [0.25, 0.35])
def test_continuity_on_a_step_while_crouching(stride):
    """The crouch above with the feet stepping ``stride`` fore and aft (beyond a leg's reach unless the hips
    come down). Where a foot's goal first lies just beyond its leg at the reference pose, a pulled step that
    held that leg's reach row on its edge turned the crouch another way: the hips jumped 15× the largest
    goal step between two frames (stride 0.25), or a frame was left unreached (0.35)."""
    n = 160
    goals = _rest_goals(n)
    t = np.linspace(0.0, 1.0, n)
    _crouch(goals, 0.35 * np.sin(np.pi * t))
    swing = np.sin(2.0 * np.pi * t)
    for name, sign in (("leg.L", 1.0), ("leg.R", -1.0)):
        positions = goals[name][0].copy()
        positions[:, 1] -= sign * stride * swing
        positions[:, 2] += 0.08 * np.clip(sign * swing, 0.0, None)  # the stepping foot lifts
        goals[name] = (positions, goals[name][1])
    result = solve_body(BODY, humanoid_chains(goals), body_root="hips")
    assert _reached(result).all()
    goal_step = max(np.linalg.norm(np.diff(goals[k][0], axis=0), axis=1).max() for k in goals)
    head_step = np.linalg.norm(np.diff(result.pose.heads, axis=0), axis=2).max()  # any bone's head, per frame
    assert head_step <= 10.0 * goal_step, (head_step, goal_step)


@pytest.mark.parametrize("radius", [0.12, 0.2])
def test_continuity_looking_round_with_a_hand_out_of_reach(radius):
    """compare_body's look path on the humanoid: the head's goal (position only) round a circle of ``radius``,
    the feet and hands held where they are at rest. The head leans away from the left hand, whose goal goes
    out of reach (up to 163 / 270 mm) while the head's does by up to 15 / 47 mm. The feet and the right hand
    are met on every frame, and no bone jumps. Before the lowest level's curvature floor
    (``priority.CURVATURE_FLOOR``) the left hand's steps overshot and never settled: the largest bone step
    was 15.9× / 13.2× the largest goal step, and a frame left the right hand 0.17 mm or the feet 0.14 mm off."""
    n = 160
    goals = _rest_goals(n)
    angle = 2.0 * np.pi * np.linspace(0.0, 1.0, n)
    circle = radius * np.stack([np.cos(angle) - 1.0, np.sin(angle), np.zeros(n)], axis=1)
    goals["spine"] = (goals["spine"][0] + circle, None)
    for hand in ("arm.L", "arm.R"):
        goals[hand] = (goals[hand][0], None)
    result = solve_body(BODY, humanoid_chains(goals), body_root="hips")
    for name in ("leg.L", "leg.R", "arm.R"):
        assert result.goal(name).reached().all(), name
    for name in ("spine", "arm.L"):
        goal = result.goal(name)
        assert (~goal.reached()).sum() > n // 2, name  # out of reach on most frames
        assert np.all(goal.error >= goal.bound), name
    goal_step = max(np.linalg.norm(np.diff(goals[k][0], axis=0), axis=1).max() for k in goals)
    head_step = np.linalg.norm(np.diff(result.pose.heads, axis=0), axis=2).max()  # any bone's head, per frame
    assert head_step <= 10.0 * goal_step, (head_step, goal_step)


def test_overlapping_chains_and_a_root_in_a_chain_are_refused():
    goal = BodyGoal(np.zeros((1, 3)))
    with pytest.raises(IKInputError, match="'a'.*'b'|share"):
        solve_body(BODY, [BodyChain("a", "spine", "chest", goal), BodyChain("b", "chest", "head", goal)])
    with pytest.raises(IKInputError, match="body root"):
        solve_body(BODY, [BodyChain("a", "hips", "chest", goal)], body_root="hips")


def test_weight_zero_goal_is_ignored_and_lower_priority_gives_way():
    goals = _rest_goals(1)
    far = goals["arm.L"][0] + np.array([[2.0, 0.0, 0.0]])
    goals["arm.L"] = (far, None)
    ignored = solve_body(BODY, humanoid_chains(goals, weights={"arm.L": 0.0}), body_root="hips")
    assert np.all(ignored.root_location == 0.0)
    assert ignored.goal("arm.L").status[0] != GoalStatus.REACHED


def test_every_goal_at_weight_zero_leaves_the_trunk_at_the_reference():
    """No goal asks the trunk anything: it keeps the reference (the trunk solve once raised on no goals)."""
    sets = random_goal_sets(BODY, 3, 4)
    chains = humanoid_chains(sets.goals, weights={name: 0.0 for name in CHAIN_BONES})
    result = solve_body(BODY, chains, body_root="hips")
    assert np.all(result.root_location == 0.0)
    hips = BODY.dofs([BODY.names.index("hips")])
    assert np.all(result.q[:, hips] == 0.0)


def test_limbs_are_hi_chains_with_their_swivel_and_pole():
    """Inside the body a limb is exactly the HI solve of its chain in its start bone's parent frame."""
    sets = random_goal_sets(BODY, 4, 20)
    swivel = np.linspace(-1.0, 1.0, 20)
    pole = np.array([0.6, 0.5, 1.2])
    chains = tuple(replace(c, swivel=swivel) if c.name == "arm.L" else replace(c, poles=pole, zero_plane_map="POLE_OBJECT")
                   if c.name == "arm.R" else c for c in humanoid_chains(sets.goals))
    result = solve_body(BODY, chains, body_root="hips")
    assert _reached(result).all()
    layouts = {c.name: [BODY.bone_index(b) for b in (c.start, c.tip)] for c in chains}
    for name, keywords in (("arm.L", {"swivel": swivel}), ("arm.R", {"poles": pole, "zero_plane_map": "POLE_OBJECT"})):
        start, tip = layouts[name]
        bones = list(range(start, tip + 1))
        parent = BODY.parents[start]
        frame, origin = result.pose.frames[:, parent], result.pose.heads[:, parent]
        local = np.einsum("nji,nj->ni", frame, sets.goals[name][0] - origin)
        if "poles" in keywords:
            keywords = {**keywords, "poles": np.einsum("nji,nj->ni", frame, pole - origin)}
        chain = BODY.chain_of(bones)
        alone = solve_hi(chain, local, np.zeros(chain.n_dof), **keywords)
        assert np.allclose(result.q[:, BODY.dofs(bones)], alone.result.q, atol=1e-12)
        assert np.allclose(result.goal(name).hi.solver_normals, alone.solver_normals, atol=1e-12)


def test_a_hand_out_of_reach_leaves_the_higher_goals_met():
    """Random bodies whose left hand goal is thrown far off: the feet and head (higher priorities) still hold."""
    sets = random_goal_sets(BODY, 3, 200)
    goals = dict(sets.goals)
    goals["arm.L"] = (goals["arm.L"][0] + np.random.default_rng(0).normal(size=(200, 3)) * 0.8, None)
    result = solve_body(BODY, humanoid_chains(goals), body_root="hips")
    for name in ("leg.L", "leg.R"):
        assert np.all(result.goal(name).status == GoalStatus.REACHED), name
    assert np.mean(result.goal("spine").status == GoalStatus.REACHED) >= 0.99
    hand = result.goal("arm.L")
    assert np.all(hand.error[hand.status != GoalStatus.REACHED] >= hand.bound[hand.status != GoalStatus.REACHED])


def test_history_independence_with_goals_out_of_reach():
    """Frames that take the second path and the polish (a third of them, a hand thrown off) are solved on
    sub-batches there: still the same bits in chunks of 7 and in reverse."""
    n = 60
    goals = dict(random_goal_sets(BODY, 5, n).goals)
    far = goals["arm.L"][0].copy()
    far[::3] += np.random.default_rng(1).normal(size=(len(far[::3]), 3)) * 0.8
    goals["arm.L"] = (far, None)
    whole = solve_body(BODY, humanoid_chains(goals), body_root="hips")
    assert np.any(whole.goal("arm.L").status != GoalStatus.REACHED)
    for rows in [np.arange(n)[::-1]] + [np.arange(i, min(i + 7, n)) for i in range(0, n, 7)]:
        part = solve_body(BODY, humanoid_chains({k: (v[0][rows], None if v[1] is None else v[1][rows])
                                                  for k, v in goals.items()}), body_root="hips")
        assert np.array_equal(part.q, whole.q[rows]) and np.array_equal(part.root_location, whole.root_location[rows])


def test_bones_in_no_chain_keep_the_reference_pose():
    """Fixed links (the shoulders) keep the reference's local pose, per frame; the goals are still met."""
    q, location = random_poses(BODY, np.random.default_rng(8), 30)
    shoulders = BODY.dofs([BODY.names.index("shoulder.L"), BODY.names.index("shoulder.R")])
    q[:, shoulders] = np.random.default_rng(9).uniform(-0.2, 0.2, (30, shoulders.size))
    reference = np.zeros_like(q)
    reference[:, shoulders] = q[:, shoulders]
    # A reference that changes per frame needs each limb's preferred pose given (here the rest pose).
    chains = tuple(replace(c, preferred=np.zeros(BODY.dofs(list(chain_bones(BODY, c))).size))
                   for c in humanoid_chains(goals_of_poses(BODY, q, location)))
    result = solve_body(BODY, chains, body_root="hips", reference=reference)
    assert np.array_equal(result.q[:, shoulders], reference[:, shoulders])
    assert _reached(result).all()
