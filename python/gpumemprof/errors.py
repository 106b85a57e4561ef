"""The seed's exception classes: ProfilerError is the base of the
profiler's own errors, ConfigurationError of a setting it cannot take,
VisualizationError of a drawing it cannot make.  Running out of memory is
Python's own MemoryError (or the framework's), never one of these."""


class ProfilerError(Exception):
    """A profiler error."""


class ConfigurationError(ProfilerError, ValueError):
    """A configuration the profiler cannot take (a bad threshold, device or path)."""


class VisualizationError(ProfilerError):
    """A drawing the profiler cannot make."""
