"""Gateway fixtures (defined in gw_support.py, which the tests also import helpers from)."""

from gw_support import live, up_2h  # noqa: F401

from tests.web.scripted_llm import llm  # noqa: F401 - the scripted model fixture
