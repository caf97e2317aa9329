"""ROS bags in, without ROS: ``dataset-convert BAG OUT --format openarm|lerobot`` (needs rosbags:
pip install 'openarm-sim-dataset[rosbag]').

- :mod:`.bag`: opening a rosbag2 folder (MCAP, SQLite3), a lone ``.mcap``/``.db3`` or a ROS 1 ``.bag``;
- :mod:`.messages`: the message types read (a registry) and how each becomes values;
- :mod:`.mapping`: which topic is which stream (a map file, or made from the bag through the robot profiles);
- :mod:`.merge`: an arm's joints from several topics into rows, as of each time;
- :mod:`.faults`: the recording's own faults, by topic and time (a registry of checks);
- :mod:`.convert`: the bag to a 0.4.0 dataset, each stream at its own rate; :mod:`.lerobot`: to LeRobot,
  frames driven by a reference topic; :mod:`.inspect`: what a bag holds, and the map to edit.
"""

from __future__ import annotations

from .bag import Bag, BagError, bag_paths, is_bag
from .convert import BagConversion, BagReport, bag_to_openarm
from .faults import FAULTS, Finding
from .inspect import inspect_bag
from .lerobot import bag_to_lerobot
from .mapping import BagMap, TopicMap, auto_map, load_map, map_yaml
from .messages import MESSAGES

__all__ = ["FAULTS", "MESSAGES", "Bag", "BagConversion", "BagError", "BagMap", "BagReport", "Finding", "TopicMap",
           "auto_map", "bag_paths", "bag_to_lerobot", "bag_to_openarm", "inspect_bag", "is_bag", "load_map", "map_yaml"]
