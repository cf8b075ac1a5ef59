"""What the store-owning services (the writers in `ingest/`, the readers in `query/`) share: the
framework bound to the process's stores. Sits above both `base` and `stores`, which import nothing
of each other."""
