"""The one compiled part of the package: the recorder's frame put (openarm_sim_dataset/_ringput.c).

Optional: where no C compiler is found the build goes on without it and the recorder runs the same steps
in Python (record_writer.Producer.put), slower at the tail of add_frame's latency. Everything else is in
pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("openarm_sim_dataset._ringput", ["openarm_sim_dataset/_ringput.c"],
                             extra_compile_args=["-O2"], optional=True)])
