"""Facts read from a log line whatever its template: addresses and their class, ports,
interface settings, errnos, signals, exit codes, counts, versions (see :mod:`extract`)."""
