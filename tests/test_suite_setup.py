"""The test suite's own set-up: what `make test` relies on to spread the tests over its workers."""

import pytest


@pytest.mark.xdist_group("cpu-model")
def test_xdist_groups_are_honoured(request):
    """Under ``--dist loadgroup`` the tests that share the CPU checkpoint (``xdist_group("cpu-model")``)
    run on one worker, which builds and loads it once; pytest-xdist marks such a test by a
    ``@GROUP`` suffix on its node id. pytest 9.2 with pytest-xdist 3.8 drops the suffix and spreads the
    group (pytest-xdist issue #1386): every worker then waits on the checkpoint's build and loads it
    again. Outside a loadgroup run there is nothing to check."""
    argv = getattr(request.config, "workerinput", {}).get("mainargv", [])     # a worker's: the run's
    if "loadgroup" not in " ".join(argv).replace("=", " ").split():
        pytest.skip("not a worker of a --dist loadgroup run")
    assert request.node.nodeid.endswith("@cpu-model"), (
        f"{request.node.nodeid}: the xdist group is not applied (pytest {pytest.__version__}); "
        "install the tested versions: make install (requirements.lock)")
