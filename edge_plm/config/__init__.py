"""Configuration: the settings (one TOML file over built-in defaults), the commented default
file generated from them, and where a device's model starts."""
