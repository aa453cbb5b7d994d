"""nplm from Python (nplm.api): `import nplm` stays light, `nplm.train` takes what a user has
(a Config, a dict, the command's flags) and shows the command's progress lines unless quiet,
and `nplm.load(workdir)` gives the numbers the commands print, read through the same
functions."""

import json
import subprocess
from pathlib import Path

import pytest

from nplm import api
from nplm.config import Config, ConfigError
from nplm.flagfiles import config_from_flagfile
from tests.conftest import write_text_corpus
from tests import cli

TINY = ['--dataset=text:corpus', '--order=3', '--feature_size=8', '--hidden_size=8',
        '--epochs=2', '--batch_size=32', '--eval_batch_size=64', '--unk_max_count=1',
        '--data_dir=tfds']


def python(code: str, cwd: Path, fresh: bool = False) -> subprocess.CompletedProcess:
  """`python -c code` in `cwd`, the checkout importable as an installed package would be
  (`fresh`: in a fresh Python, not one of the worker's forked children)."""
  return cli.run(code=code, cwd=cwd, timeout=600, fresh=fresh)


def nplm(*args: str, cwd: Path) -> str:
  done = cli.run(*args, cwd=cwd, timeout=600)
  assert done.returncode == 0, done.stderr
  return done.stdout


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """A tiny run trained by `nplm.train` from Python twice (shown, then quiet), in a directory
  that is the current one of the child processes: (that directory, the two results)."""
  home = tmp_path_factory.mktemp('api')
  write_text_corpus(home / 'corpus')
  code = ('import json, nplm\n'
          f'shown = nplm.train({[*TINY, "--workdir=runs/shown"]!r})\n'
          f'quiet = nplm.train({[*TINY, "--workdir=runs/quiet"]!r}, quiet=True)\n'
          'print(json.dumps([shown["test_ppl"], quiet["test_ppl"]]))\n')
  done = python(code, home)
  assert done.returncode == 0, done.stderr
  return home, done


@pytest.mark.slow
def test_import_nplm_loads_neither_jax_nor_tfds(tmp_path):
  done = python('import sys, nplm\n'
                'print(sorted(m for m in ("jax", "flax", "tensorflow_datasets") '
                'if m in sys.modules))\n'
                'print(callable(nplm.load), callable(nplm.train), "jax" in sys.modules)', tmp_path,
                fresh=True)
  assert done.returncode == 0, done.stderr
  assert done.stdout.split('\n')[:2] == ['[]', 'True True True']


@pytest.mark.slow
def test_train_shows_the_commands_progress_lines_unless_quiet(trained):
  _, done = trained
  shown, quiet = json.loads(done.stdout)
  assert shown == quiet  # The same run, shown or not.
  lines = done.stderr.splitlines()
  # The first run's start-up, epoch and final lines; none from the quiet one.
  assert any('runs/shown' in line for line in lines), done.stderr
  assert not any('runs/quiet' in line for line in lines), done.stderr
  assert any('valid perplexity' in line for line in lines), done.stderr


def test_train_takes_a_config_a_dict_or_flags_alike():
  config = Config(workdir='runs/x', order=3, epochs=2, dataset='text:corpus')
  flags = ['--workdir=runs/x', '--order=3', '--epochs=2', '--dataset=text:corpus']
  assert api._configs(config) is config
  assert api._configs(dict(workdir='runs/x', order=3, epochs=2, dataset='text:corpus')) == config
  assert api._configs(flags) == config
  assert api._configs(' '.join(flags)) == config
  assert api._configs([config, config]) == [config, config]
  # A recipe read as `nplm train` reads it: its flags first, the typed ones winning.
  assert (api._configs(['--workdir=runs/x', '--flagfile=mlp1', '--epochs=1'])
          == config_from_flagfile('mlp1', workdir='runs/x', epochs=1))
  for wrong in (42, ['--flagfile=mlp1', 'runs/x']):
    with pytest.raises(ConfigError, match='nplm.train takes'):
      api._configs(wrong)
  with pytest.raises(ConfigError, match='no_such_knob'):
    api._configs(['--no_such_knob=1'])


@pytest.mark.slow
def test_load_gives_the_numbers_the_commands_print(trained):
  """A relative workdir, read from Python and by each command, in the same directory."""
  home, _ = trained
  (home / 'letter.txt').write_text('the jury said it\nwas the city\n')
  (home / 'pairs.txt').write_text('teh the\nsayd->said\n')
  sentences = ['the jury said it', 'it was the city']
  code = ('import json, nplm\n'
          'model = nplm.load("runs/shown")\n'
          'print(json.dumps({\n'
          '    "perplexity": model.perplexity("letter.txt"),\n'
          '    "text": model.perplexity("the jury said it\\nwas the city"),\n'
          f'    "score": [s.as_dict(tokens=False) for s in model.score({sentences!r})],\n'
          f'    "rank": [s.text for s in model.rank({sentences!r})],\n'
          '    "predict": [p.as_dict() for p in model.predict("the jury", k=4)],\n'
          '    "generate": model.generate("the jury", length=12, seed=3),\n'
          '    "correct": model.correct("teh jury sayd it", alpha=0.9).as_dict(),\n'
          '    "learned": model.correct("teh jury sayd it", alpha=0.9,\n'
          '                             misspellings="pairs.txt").as_dict(),\n'
          '    "vector": model.vectors()["the"].tolist()}))\n')
  done = python(code, home)
  assert done.returncode == 0, done.stderr
  got = json.loads(done.stdout)
  evaluated = json.loads(nplm('evaluate', '--workdir=runs/shown', '--text_file=letter.txt',
                              '--json', cwd=home))
  assert got['perplexity'] == got['text'] == evaluated['file']['ppl']
  scored = [json.loads(line) for line in
            nplm('score', '--workdir=runs/shown', '--json', *sentences, cwd=home).splitlines()]
  assert got['score'] == scored
  ranked = nplm('rank', '--workdir=runs/shown', *sentences, cwd=home).splitlines()
  assert got['rank'] == [line.split('  ')[-1] for line in ranked]
  (predicted,) = json.loads(nplm('predict', '--workdir=runs/shown', '--k=4', '--json',
                                 'the jury', cwd=home))
  assert got['predict'] == predicted['predictions']
  generated = nplm('generate', '--workdir=runs/shown', '--prompt=the jury', '--length=12',
                   '--seed=3', cwd=home)
  assert got['generate'] == generated.rstrip('\n')
  corrected = nplm('correct', '--workdir=runs/shown', '--json', '--alpha=0.9',
                   'teh jury sayd it', cwd=home)
  assert got['correct'] == json.loads(corrected)
  learned = nplm('correct', '--workdir=runs/shown', '--json', '--alpha=0.9',
                 '--misspellings=pairs.txt', 'teh jury sayd it', cwd=home)
  assert got['learned'] == json.loads(learned) and got['learned'] != got['correct']
  # The vectors are the model's C, row by row as its vocabulary numbers the words.
  from nplm.use.trained import load_trained
  read = load_trained(home / 'runs' / 'shown')
  table = read.params['model']['C']['embedding']
  assert got['vector'] == pytest.approx(table[read.vocab.id_of('the')].tolist())


def test_load_refuses_what_is_not_a_run_in_one_line(tmp_path):
  with pytest.raises(Exception, match='holds no training run'):
    api.load(tmp_path)
