"""Options of the CPU tests: how many fuzzed programs the engines are compared on."""


def pytest_addoption(parser):
    parser.addoption("--fuzz-programs", type=int, default=2000,
                     help="random instruction streams compared between engines (default 2000)")
    parser.addoption("--model-fuzz", type=int, default=0,
                     help="compact fuzzed programs run on the compiled CPU model (default 0: skipped)")
