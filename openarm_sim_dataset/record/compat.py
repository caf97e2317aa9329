"""Kept for old import paths: the live recorder's writer process and its transport now live in
:mod:`openarm_sim_dataset.record` (:mod:`~openarm_sim_dataset.record.ring`,
:mod:`~openarm_sim_dataset.record.messages`, :mod:`~openarm_sim_dataset.record.writer_process`,
:mod:`~openarm_sim_dataset.record.zygote`). The names here are those modules' objects; settings read
at run time (``SHARED_DESCRIPTORS``, ``WRITER_NICE``) are read in the module that defines them, so
patch that module, not this one."""

from .messages import MAX_MESSAGE, PollingReader, pack, pack_request, read_message
from .ring import (
    DESCRIPTOR_WORDS,
    HEADER,
    PUBLISHED,
    SHARED_DESCRIPTORS,
    TAIL,
    TAKEN,
    Producer,
    Ring,
    make_ring_fd,
    put_frame,
    ring_size,
)
from .writer_process import DISCARDED_KEY, WRITER_NICE, writer_main
from .zygote import Zygote, zygote

__all__ = [
    "DESCRIPTOR_WORDS",
    "DISCARDED_KEY",
    "HEADER",
    "MAX_MESSAGE",
    "PUBLISHED",
    "SHARED_DESCRIPTORS",
    "TAIL",
    "TAKEN",
    "WRITER_NICE",
    "PollingReader",
    "Producer",
    "Ring",
    "Zygote",
    "make_ring_fd",
    "pack",
    "pack_request",
    "put_frame",
    "read_message",
    "ring_size",
    "writer_main",
    "zygote",
]
