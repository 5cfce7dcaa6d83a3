"""Settings for the retrieval benchmark's server: the product's, plus a benchmark-only route.

The bare DRF endpoint (the floor any Django API can reach) is served from its own URLconf so
it never appears in the product's routes.
"""

from memoryconsole.settings import *  # noqa: F403

ROOT_URLCONF = "benchmarks.retrieval_search_urls"
