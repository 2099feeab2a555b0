# Two commands do all the set-up on a fresh machine with Python 3.11:
#   make run    create .venv if missing, install, run the main job
#   make test   same set-up (and llama.cpp, built once), then the test suite
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install llama run merge test test-all bench clean

$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: the CPU wheel on disk; an unpinned torch pulls a multi-GB CUDA build
	$(PY) -m pip install --quiet torch==2.13.0
	# the tested environment exactly (requirements.lock); pyproject.toml's ranges are for users' own stacks
	$(PY) -m pip install --quiet -c requirements.lock -e '.[test]'
	@$(PY) -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	@touch $(STAMP)

install: $(STAMP)

# llama.cpp for its engine and its tests (the `llama` extra): built from source by pip, once
LLAMA_STAMP := $(VENV)/.llama-installed
$(LLAMA_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -c requirements.lock -e '.[test,llama]'
	@touch $(LLAMA_STAMP)

llama: $(LLAMA_STAMP)

# Main job (grows with the project): simulate the FIFO example against Amaranth's own simulator
# (waveform in build/), compile it into a Qwen3.5-architecture checkpoint, run that with stock
# transformers against the simulator and write its layer report; then build the RV32 CPU from hdl/,
# compile a C program and run it on the CPU's netlist and on unicorn; finally compile the CPU into an
# 11-layer checkpoint (cached in build/cpu-model/) and run the sample C program inside the model
# (speculatively, then generated token by token).
run: $(STAMP)
	$(VENV)/bin/netlist2tf sim hdl.examples.fifo:FIFO --cycles 1000 --seed 1 \
		--vcd build/fifo.vcd --compare-amaranth
	$(VENV)/bin/netlist2tf compile hdl.examples.fifo:FIFO --layers 8 --out build/compiled/fifo
	$(VENV)/bin/netlist2tf verify build/compiled/fifo --cycles 200 --batch 4
	$(VENV)/bin/netlist2tf report hdl.examples.fifo:FIFO --layers 8 --out build/reports/fifo
	$(VENV)/bin/netlist2tf synth 'hdl.rv32:Core'
	$(VENV)/bin/cpu run cpu/programs/hello.c --engine netlist --trace build/hello.trace
	$(VENV)/bin/cpu run cpu/programs/hello.c --engine unicorn
	# hi.c exits with 10 (its digit sum): the exit status is the program's, so expect exactly that.
	# First by speculative decoding (the default), then generated token by token (--plain): the same
	# output, records (cmp) and tokens.
	$(VENV)/bin/cpu run cpu/programs/hi.c --engine model --dtype bfloat16 --trace build/hi-model.trace \
		|| test $$? -eq 10
	$(VENV)/bin/cpu run cpu/programs/hi.c --engine model --dtype bfloat16 --plain \
		--trace build/hi-model-plain.trace || test $$? -eq 10
	cmp build/hi-model.trace build/hi-model-plain.trace

# The compiled CPU merged in front of the embedded random Qwen3.5 base (docs/design/merge.md), and hi.c run
# inside the merged model (exit code 10, as above).
merge: $(STAMP)
	$(VENV)/bin/netlist2tf merge $$($(PY) -c "from cpu.model_engine import build_checkpoint; print(build_checkpoint())") \
		--out build/merged/cpu
	$(VENV)/bin/cpu run cpu/programs/hi.c --engine model --checkpoint build/merged/cpu || test $$? -eq 10

test: $(STAMP) $(LLAMA_STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup --durations=25

# Everything, including the slow end-to-end cases.
test-all: $(STAMP) $(LLAMA_STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup -m ''

bench: $(STAMP)
	$(PY) bench/sim_speed.py
	$(PY) bench/cpu_speed.py

clean:
	rm -rf build
