"""Learning from datasets: the PyTorch loader (:mod:`.torch`), behaviour cloning (:mod:`.bc`), the Gymnasium
environments (:mod:`.env`), policies and the evaluator. Each heavy dependency is an extra."""
