"""A run's files in its workdir: the lock, checkpoints and their checksums, metrics, the
summary, the learning-curve figure, and one model's bookkeeping over them (model_run)."""
