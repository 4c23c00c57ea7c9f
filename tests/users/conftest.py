import pytest

from tests.support.tenancy import make_master


@pytest.fixture
def other_master(app):
    """A second, unrelated master client (another tenant tree)."""
    return make_master(app, "Other organisation")
