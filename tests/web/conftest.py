"""Explorer test fixtures (defined in browser.py, whose helpers the tests also import)."""

from tests.web.browser import browser, page  # noqa: F401
from tests.web.scripted_llm import llm  # noqa: F401 - the scripted model fixture
