"""`nplm train` on the tiny fixture corpus, for tests that need whole processes (multi-process
runs through launch.local): the same flags, the same run, but the corpus comes from
tests/fixtures (prepared in --data_dir)."""

from absl import app

from nplm import cli, flagfiles, parallel
from nplm.trainer import run
from tests.conftest import load_tiny_corpus


def main(argv):
  del argv
  cli.show_progress_lines()
  config = cli.config_from_flags()
  parallel.initialize_processes(config)
  corpus = parallel.main_process_first(lambda: load_tiny_corpus(config.data_dir))
  run(config, corpus)


if __name__ == '__main__':
  flagfiles.define_config_flags()
  app.run(main)
