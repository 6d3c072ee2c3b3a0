"""Below every layer: run-directory files, the user's-mistake error, field declarations and process reporting."""
