"""The experiment config: one schema for every field, and the typed sections a checked config is built into."""
