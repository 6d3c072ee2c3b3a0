"""Below every layer: run directories' file names, the user's-mistake error, how a config field is declared,
and how a command's process reports (log lines, library chatter, a full disk, a closed pipe)."""
