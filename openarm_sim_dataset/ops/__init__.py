"""Operations that make a dataset from datasets: merge, repair, edit and convert (sources never modified;
every output written through the core's commit protocol)."""
