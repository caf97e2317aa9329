"""Robots are data: one profile per robot (``data/<name>.yaml``), with its joints, the names each recorder
writes them under, the units and limits of each, and where every number comes from.

- :func:`profiles` / :func:`get_profile`: the shipped profiles; :func:`load_profile_file`: a user's file;
- :func:`detect`: which profile, naming and unit variant a dataset's robot_type, names and values are;
  :class:`RobotMatch` then says per dimension which joint it is (:meth:`RobotMatch.joints_for`) and which
  vectors do not fit their declared unit (:meth:`RobotMatch.unit_problems`).
"""

from __future__ import annotations

from .detect import RobotMatch, detect, written_names
from .profile import ROLES, UNITS, JointLimit, Naming, RobotProfile, UnitVariant, parse_profile
from .registry import DATA_DIR, GENERIC, get_profile, load_profile_file, profiles

__all__ = [
    "DATA_DIR",
    "GENERIC",
    "ROLES",
    "UNITS",
    "JointLimit",
    "Naming",
    "RobotMatch",
    "RobotProfile",
    "UnitVariant",
    "detect",
    "get_profile",
    "load_profile_file",
    "parse_profile",
    "profiles",
    "written_names",
]
