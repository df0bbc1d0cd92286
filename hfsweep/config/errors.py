"""The errors a user sees in one line: the key, what is wrong, and the fix."""


class ConfigError(ValueError):
    """A config the sweep cannot run; the message names the key and how to fix it."""


class HubUnreachableError(ConfigError):
    """The config needs the Hugging Face hub, which cannot be reached; names the offline override."""


class RayStartError(ConfigError):
    """A local Ray that did not start, refused like a bad config: before anything is written, in
    one line that says where Ray's own output is."""
