"""dora-rs nodes: the recorder as a node of a data-collection dataflow (``openarm-sim-dataset-dora-recorder``), and
simulated stand-ins for the arms, leader and devices of such a dataflow (``openarm-sim-dataset-dora-sim``), which send
the messages ``dora-openarm`` nodes send."""
