"""`python -m experiments.brown` on the tiny fixture corpus, for tests that need whole
processes (multi-process runs through launch.local): the same flags, the same run, but the
corpus comes from tests/fixtures (prepared in --data_dir)."""

from absl import app

from experiments import brown
from nplm import parallel
from tests.conftest import load_tiny_corpus


def main(argv):
  del argv
  brown.show_progress_lines()
  config = brown.config_from_flags()
  parallel.initialize_processes(config)
  corpus = parallel.main_process_first(lambda: load_tiny_corpus(config.data_dir))
  brown.run(config, corpus)


if __name__ == '__main__':
  brown.define_flags()
  app.run(main)
