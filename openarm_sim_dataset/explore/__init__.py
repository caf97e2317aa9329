"""Looking at datasets: figures (:mod:`.info`), the dataset card, pictures (:mod:`.show`) and the browser
viewer (:mod:`.view`)."""
