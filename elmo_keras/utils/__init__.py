"""Infrastructure every other part may use: crash-safe files and locks, CPU features, host memory, renamed
arguments, and the aliases that keep the first generation's module paths importable."""
