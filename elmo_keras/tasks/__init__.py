"""What users build from the layers: classifiers and taggers (models), their metrics and callbacks, precomputed
features and embed-once training, static-vector baselines, bundled datasets, and what `elmo-keras train` runs."""
