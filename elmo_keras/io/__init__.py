"""How a model gets in and out: the only place that knows file layouts (options.json, the released hdf5 weights,
TF Hub modules) and where files come from (paths, URLs, the download cache)."""
