"""The errors a user sees in one line: the key, what is wrong, and the fix."""


class ConfigError(ValueError):
    """A config the sweep cannot run; the message names the key and how to fix it."""


class HubUnreachableError(ConfigError):
    """The config needs the Hugging Face hub, which cannot be reached; names the offline override."""
