"""The platform's settings with django-q2 running tasks inline, for a benchmark that serves pages from its own
process (bench/gaps_closed.py): the embedded store then has one owner, this process."""

from ragsite.settings import *  # noqa: F403
from ragsite.settings import Q_CLUSTER

Q_CLUSTER["sync"] = True
