# Quickstart targets; see README.md.
BIN := .venv/bin
STAMP := .venv/.installed

.PHONY: setup demo test clean

# Reinstall (rebuilding native/) whenever the build inputs change.
$(STAMP): pyproject.toml CMakeLists.txt $(wildcard native/*.cpp native/*.hpp) scripts/setup.sh
	scripts/setup.sh
	touch $(STAMP)

setup: $(STAMP)

# The main job on the embedded default: a generated 100k-node power-law graph,
# partitioned for 2 ranks, trained on 2 ranks (hybrid mode, native sampler).
demo: setup
	$(BIN)/python -m fastsample.data synth --preset small data/demo --overwrite
	$(BIN)/python -m fastsample.partition data/demo data/demo-2 --parts 2 --overwrite
	$(BIN)/mpiexec -n 2 $(BIN)/python -m fastsample.train --data data/demo-2 --epochs 3 --threads 1

test: setup
	$(BIN)/python -m pytest -q

clean:
	rm -rf .venv build data
