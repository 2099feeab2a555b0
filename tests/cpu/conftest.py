"""Options of the CPU tests: how many fuzzed programs the engines are compared on."""


def pytest_addoption(parser):
    parser.addoption("--fuzz-programs", type=int, default=2000,
                     help="random instruction streams compared between engines (default 2000)")
