# Two commands do all the set-up on a fresh machine with Python 3.11:
#   make run    create .venv if missing, install, run the main job
#   make test   same set-up, then the test suite
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test test-all bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: the CPU wheel on disk; an unpinned torch pulls a multi-GB CUDA build
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test]'
	@$(PY) -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	@touch $(STAMP)

install: $(STAMP)

# Main job (grows with the project): synthesize the FIFO example, simulate 1,000 cycles of random
# input, check every output against Amaranth's own simulator, and write the waveform.
run: $(STAMP)
	$(VENV)/bin/netlist2tf synth hdl.examples.fifo:FIFO
	$(VENV)/bin/netlist2tf sim hdl.examples.fifo:FIFO --cycles 1000 --seed 1 \
		--vcd build/fifo.vcd --compare-amaranth

test: $(STAMP)
	$(PY) -m pytest -q -n 2

# Everything, including the slow end-to-end cases.
test-all: $(STAMP)
	$(PY) -m pytest -q -n 2 -m ''

bench: $(STAMP)
	$(PY) bench/sim_speed.py

clean:
	rm -rf build
