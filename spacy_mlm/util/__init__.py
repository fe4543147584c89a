"""What every layer may use and that belongs to no task: atomic writes and
saves, logs, progress, settings and the few shared numeric helpers."""
