"""accelbench: measure, explain and predict how fast large language models train."""

__version__ = "0.1.0"
