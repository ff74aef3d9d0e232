"""Error types whose message is one line naming the file or key at fault, and the line numbers of a warning."""

# Bad lines named one by one in warnings; the rest are counted.
MAX_WARNINGS = 10


def brief_list(numbers: list[int]) -> str:
    """``1, 5, 9`` or ``1, 5, 9, ... (12 in all)``: line numbers for a warning of bounded length."""
    shown = ", ".join(map(str, numbers[:MAX_WARNINGS]))
    return shown if len(numbers) <= MAX_WARNINGS else f"{shown}, ... ({len(numbers)} in all)"


class NmtError(Exception):
    """Base class: an error caused by the user's input, reported as one line without traceback."""


class ConfigError(NmtError):
    """A configuration key is unknown or has a bad value."""


class DataError(NmtError):
    """A corpus file is missing, unreadable, misaligned or emptied by the filters."""


class DownloadError(NmtError):
    """A URL or mirror file could not be fetched or failed its checksum."""


class TrainingError(NmtError):
    """Training could not go on, e.g. a data-parallel process failed."""


class OutputError(NmtError):
    """An output file could not be written: the disk is full or a file size limit was reached."""
