"""Fixtures of the multi-process tests: live daphne servers and a Redis database of their own."""
import pytest

from tests.multiprocess.servers import attach_server_logs, redis_url, servers  # noqa: F401


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    attach_server_logs(item, report)
    return report
