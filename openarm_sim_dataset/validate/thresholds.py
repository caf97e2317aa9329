"""Thresholds of the validation checks (no dependencies: the CLI builds its --help from them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Thresholds:
    """Defaults of every threshold (all overridable from the CLI)."""

    gap_periods: float = 1.5  # an interval longer than this many declared periods is a dropped sample
    rate_tolerance: float = 0.05  # median interval within this fraction of the declared period
    # dropped-sample budget of recorded data (simulated episodes: any gap fails); set from measurements
    # (README, "Timing of recorded data"): our live recorder on a loaded 2-core machine drops 27 % of its
    # state samples with 60 ms holes and its cameras 463.7 ms; the reference fixtures 0.3 %, 8.7 ms
    max_dropped_fraction: float = 0.5  # dropped / (stored + dropped) samples of one stream of one episode
    max_gap_seconds: float = 1.0  # s: longest interval of one stream of one episode
    # rad/s: a joint faster than this between consecutive samples jumps (per sample: times the stream's median
    # period, 0.12 rad at 250 Hz, 3 rad at 10 Hz); beyond every OpenArm joint: the fastest, joints 5-7
    # (Damiao DM-J4310), turn 20.9 rad/s at no load (OpenArm v10 description's velocity limits; joints 1-2
    # 16.8, joints 3-4 5.4), and 30 rad/s is the DM-J4310's default velocity range (VMAX); measured: ours
    # <= 10 rad/s (sim servos after a policy's 0.2 rad steps), recorded fixtures 1.1, LeRobot fixtures 4.9
    max_joint_speed: float = 30.0
    max_joint_step: float = 0.0  # rad per sample instead of max_joint_speed x median period, at any rate (0: derived)
    joint_limit_margin: float = 0.05  # rad beyond the OpenArm joint limits (joints 1-7; MuJoCo limits are soft)
    quat_norm_tolerance: float = 1e-3  # | |q| - 1 | for pose quaternions
    min_duration: float = 0.25  # s: shorter episodes are unusable
    plane_error: float = 0.001  # m: median distance of back-projected floor/table pixels to their plane
    reprojection_px: float = 2.0  # px at 160x120 (in proportion to the image diagonal above): cube centre vs mask centroid
    wrist_hit_fraction: float = 0.9  # fraction of in-view frames where the red cube projects onto itself
    frozen_seconds: float = 1.0  # s: a camera showing the same image this long while the arms move is frozen
    frozen_noise_floor: float = 0.1  # grey levels: mean |difference| of consecutive frames below this = same image
    frozen_motion: float = 0.02  # rad: arm joints moving more than this during a run make the run suspicious
    qvel_window_seconds: float = 0.1  # s: windows over which qvel's integral is compared with qpos's displacement
    qvel_motion: float = 0.01  # rad: a joint's displacement over a window above this makes the window a moving one
    qvel_min_corr: float = 0.9  # correlation (integral vs displacement) from which a wrong scale or sign fails
    qvel_scale_tolerance: float = 1.5  # median ratio integral/displacement must lie in [1/x, x]
    follow_max_lag_seconds: float = 0.5  # s: lags searched between an obs joint and its command
    follow_motion: float = 0.05  # rad: joints whose obs or command range is at most this are not compared
    follow_scale_tolerance: float = 3.0  # range ratio obs/command must lie in [1/x, x]
    follow_held_seconds: float = 1.0  # s: a joint under a held command away from its rest this long moves on its own
    follow_margin: float = 0.1  # another command column correlating this much better than its own: swapped
    follow_min_corr: float = 0.3  # an obs joint correlating with its command at least this negatively: inverted
    frozen_view_fraction: float = 0.01  # simulated: pixels of a camera's view that changed (depth/labels) in a frozen run
    frozen_depth_m: float = 0.005  # m: depth change of a pixel that counts as a change of the view
    coverage_periods: float = 3.0  # camera periods: first/last frame at most this far inside the state streams' span (measured <= 1.47)
    continuity_ratio: float = 3.0  # a frame this many times farther from its nearer neighbour than they are apart
    continuity_floor: float = 1.0  # grey levels: least neighbour distance the ratio divides by (still scenes)
    continuity_min_grey: float = 4.0  # grey levels (thumbnail): least distance of a frame that does not belong
    camera_max_lag_seconds: float = 1.5  # s: lags searched between a camera's image motion and its joints' motion
    camera_lag_step_seconds: float = 0.02  # s: lag resolution (at most half a camera period)
    timing_min_frames: int = 12  # cameras with fewer frames are not cross-correlated
    timing_min_corr: float = 0.5  # best correlation below this: the lag is not measurable (reported)
    timing_margin: float = 0.1  # a lag outside the allowed ones correlating this much better: out of time
    timing_gripper_motion: float = 0.005  # gripper units: a wrist camera's own gripper moving more is ranked beside its joints
    camera_lag_tolerance_periods: float = 1.0  # camera periods: simulated lag within +- this, recorded lead
    camera_max_latency_seconds: float = 0.3  # s: recorded data, pictures later than the joints by more: warn
    render_psnr_db: float = 25.0  # dB: re-rendered vs stored frame on another GL renderer (approximate)
    sim_render_stride: int = 1  # re-render every K-th camera frame (1: every frame)
    # the signal checks (every dimension of every state and action vector, whatever the robot)
    # a dimension whose range over an episode is at most this times max(1, |value|) rests there (float32
    # noise of a servoed joint at rest, 1e-9..1e-5 rad in our simulation, stays below it in any unit)
    signal_rest_range: float = 1e-4
    # command periods (the median interval between changes of the action): an unchanged action this long is
    # frozen (0.33 s at 30 Hz; 1 s for a 10 Hz policy stored at 250 Hz; servo quantisation repeats a few frames)
    frozen_action_min_samples: int = 10
    # share of an episode spent in frozen runs above which it warns (our planner's settles: 11 %; a public
    # SO-101 recording 7-36 %, lerobot-doctor)
    frozen_action_share: float = 0.3
    pinned_share: float = 0.9  # share of a dimension's samples at its own dataset minimum or maximum: pinned
    outlier_sigmas: float = 10.0  # std from the dimension's dataset mean: an outlier (lerobot-doctor's 10; clean data <= 4.5)
    # a single-sample step this many times the dimension's 99th-percentile step is a jump (clean data: <= 3.5)
    jump_factor: float = 10.0
    drift_sigmas: float = 3.0  # first vs last quarter of a task's episodes, in pooled within-quarter std
    drift_min_episodes: int = 8  # episodes of one task (in which the vector moves) drift needs
    convention_max_lag: int = 10  # frames searched for the lag at which the action equals the state
