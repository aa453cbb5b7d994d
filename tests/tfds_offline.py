"""TFDS catalogue builders (tiny_shakespeare, lm1b) prepared offline: their downloads served
from small fixture files written here, their own builder code run unchanged.

How: `seed_downloads(data_dir)` writes each builder's fixture download into TFDS's download
cache, `<data_dir>/downloads/<builder>/`, under the name and with the INFO file that TFDS's
DownloadManager gives a finished download of that URL with its registered checksum
(`checksums.tsv`). TFDS then takes the download as done (it checks the registered checksum
when it downloads, not when it finds a cached file), extracts it with its own extractor
(lm1b's tar.gz) and runs the builder's `_split_generators`/`_generate_examples` on it. Nothing
is patched, so any process preparing from that data dir reads the fixtures: `nplm` run as a
subprocess, as the user types it, needs only `--data_dir=<data_dir>` (or
`TFDS_DATA_DIR=<data_dir>` in its environment when the command names no --data_dir).

`serve_offline(data_dir)` seeds and also forbids network downloads in the current process, so
a cache miss (a new TFDS whose checksums or cache names changed) fails at once instead of
fetching lm1b's 1.7 GB. A child process gets the same guard by running through this module:

    python -m tests.tfds_offline train --dataset=tfds:lm1b --data_dir=D ...

seeds D, forbids downloads and runs `nplm train ...` in-process (nplm's own main; the
arguments after the module are nplm's, --data_dir=D included). Without --data_dir it seeds
$TFDS_DATA_DIR if that is set, else nothing (a reader such as `nplm evaluate --workdir=W`
takes the data dir W recorded); it never writes into the user's ~/tensorflow_datasets. The
child needs the checkout on its path (PYTHONPATH=<checkout>, or run it from there).
`hide_tensorflow()` makes a process find no TensorFlow, to test what a user without it meets.

The builders read their download with tf.io.gfile: preparing them needs TensorFlow
(`pip install nplm[tf]`). The fixtures are deterministic (a fixed seed, fixed tar and gzip
times) and small: tiny_shakespeare's input.txt is 400 lines, lm1b's archive holds two
training shards of 150 sentences and two heldout shards of 20 sentences, in the real
archive's layout.
"""

from __future__ import annotations

import gzip
import io
import os
import random
import sys
import tarfile
from pathlib import Path

# tensorflow_datasets is imported inside the functions: `python -m tests.tfds_offline` and
# `from tests.tfds_offline import ...` stay cheap until a builder is needed.

TINY_SHAKESPEARE_URL = (
    'https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt')
LM1B_URL = ('http://www.statmt.org/lm-benchmark/'
            '1-billion-word-language-modeling-benchmark-r13output.tar.gz')
LM1B_TOP = '1-billion-word-language-modeling-benchmark-r13output'
LM1B_TRAIN_DIR = 'training-monolingual.tokenized.shuffled'
LM1B_HELDOUT_DIR = 'heldout-monolingual.tokenized.shuffled'
BUILDERS = ('tiny_shakespeare', 'lm1b')

_WORDS = ('the king queen lord good my sir love death night day blood heart crown sword '
          'speak hear come go stay now then thee thou thy art hath doth shall will not '
          'and of to in that with for but what is be as so no yes here there').split()
_SPEAKERS = ('First Citizen', 'MENENIUS', 'CORIOLANUS', 'All', 'VOLUMNIA', 'Second Citizen')


def _sentence(rng: random.Random, low: int, high: int) -> str:
  return ' '.join(rng.choice(_WORDS) for _ in range(rng.randint(low, high)))


def tiny_shakespeare_text() -> str:
  """input.txt: 400 lines in the real file's shape (a speaker, a few lines of speech, a
  blank line), ending with a line break."""
  rng, lines = random.Random(1115394), []
  while len(lines) < 400:
    lines.append(rng.choice(_SPEAKERS) + ':')
    lines += [_sentence(rng, 3, 9).capitalize() + rng.choice('.,;!?')
              for _ in range(rng.randint(1, 4))]
    lines.append('')
  return '\n'.join(lines[:400]) + '\n'


def lm1b_files() -> dict[str, str]:
  """The archive's text files, by path inside it: shards named as the real ones (the
  training shards number 00001-00099 of 00100, the heldout ones 00000-00049 of 00050), one
  tokenized sentence per line, punctuation its own token."""
  rng, files = random.Random(1792209805), {}
  shards = ([f'{LM1B_TRAIN_DIR}/news.en-{i:05d}-of-00100' for i in (1, 2)],
            [f'{LM1B_HELDOUT_DIR}/news.en.heldout-{i:05d}-of-00050' for i in (0, 1)])
  for names, count in zip(shards, (150, 20)):
    for name in names:
      files[f'{LM1B_TOP}/{name}'] = ''.join(
          f'{_sentence(rng, 2, 14).capitalize()} {rng.choice(".?!")}\n' for _ in range(count))
  return files


def lm1b_archive() -> bytes:
  """The tar.gz of lm1b_files(), with the real archive's directories; fixed times, so the
  same bytes every time."""
  tar_bytes = io.BytesIO()
  with tarfile.open(fileobj=tar_bytes, mode='w', format=tarfile.GNU_FORMAT) as tar:
    directories = sorted({os.path.dirname(p) for p in lm1b_files()} | {LM1B_TOP})
    for directory in directories:
      info = tarfile.TarInfo(directory)
      info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1_400_000_000
      tar.addfile(info)
    for path, text in sorted(lm1b_files().items()):
      data = text.encode()
      info = tarfile.TarInfo(path)
      info.size, info.mode, info.mtime = len(data), 0o644, 1_400_000_000
      tar.addfile(info, io.BytesIO(data))
  return gzip.compress(tar_bytes.getvalue(), mtime=0)


def downloads() -> dict[str, dict[str, bytes]]:
  """Each builder's downloads: URL -> the bytes served for it."""
  return {'tiny_shakespeare': {TINY_SHAKESPEARE_URL: tiny_shakespeare_text().encode()},
          'lm1b': {LM1B_URL: lm1b_archive()}}


def seed_downloads(data_dir: str | os.PathLike, names=BUILDERS) -> None:
  """Puts the named builders' fixture downloads into the TFDS download cache of `data_dir`,
  where a preparation from that data dir (in any process) takes them as downloaded."""
  import tensorflow_datasets as tfds
  from etils import epath
  from tensorflow_datasets.core.download import resource as resource_lib

  data_dir = Path(data_dir).resolve()
  for name in names:
    # The builder class alone: its url_infos are the registered checksums (checksums.tsv).
    builder_cls = tfds.builder_cls(name)
    url_infos = builder_cls.url_infos
    for url, data in downloads()[name].items():
      info = url_infos[url]
      # DownloadManager._get_dl_path with the registered checksum (its dataset_name is the
      # builder's name): where a finished download of `url` lives.
      path = epath.Path(data_dir / 'downloads' / name /
                        resource_lib.get_dl_fname(url, info.checksum))
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_bytes(data)
      resource_lib.write_info_file(url=url, path=path, dataset_name=name,
                                   original_fname=info.filename, url_info=info)


class NetworkDownloadError(RuntimeError):
  """A TFDS download that the fixtures do not serve."""


def forbid_downloads() -> None:
  """Any TFDS download from the network in this process raises NetworkDownloadError."""
  from tensorflow_datasets.core.download import downloader

  def refuse(self, url, *args, **kwargs):
    raise NetworkDownloadError(f'{url} is not served by tests/tfds_offline.py (its fixtures '
                               'are in the download cache of the data dir the test seeded)')

  downloader._Downloader._sync_download = refuse  # pylint: disable=protected-access


def serve_offline(data_dir: str | os.PathLike, names=BUILDERS) -> None:
  """seed_downloads(data_dir, names), and no network download in this process."""
  seed_downloads(data_dir, names)
  forbid_downloads()


class _WithoutTensorFlow:
  """A finder of modules that finds no tensorflow, wrapping one that might."""

  def __init__(self, finder):
    self.finder = finder

  def find_spec(self, name, path=None, target=None):
    if name.partition('.')[0] == 'tensorflow':
      return None
    return self.finder.find_spec(name, path, target)

  def __getattr__(self, name):
    return getattr(self.finder, name)


def hide_tensorflow() -> None:
  """This process finds no TensorFlow, as if it were not installed: `import tensorflow`
  raises ModuleNotFoundError and importlib.util.find_spec('tensorflow') is None (what TFDS
  and etils test). Call it before anything imports TensorFlow."""
  if 'tensorflow' in sys.modules:
    raise RuntimeError('hide_tensorflow(): tensorflow is imported already')
  sys.meta_path[:] = [f if isinstance(f, _WithoutTensorFlow) else _WithoutTensorFlow(f)
                      for f in sys.meta_path]


def main(argv: list[str]) -> None:
  """`python -m tests.tfds_offline [nplm arguments]`: nplm, its TFDS downloads served from the
  fixtures (seeded into --data_dir's, or else $TFDS_DATA_DIR's, download cache; with neither,
  as for `nplm evaluate --workdir=...`, nothing is seeded) and no other download allowed."""
  data_dirs = [a.split('=', 1)[1] for a in argv if a.startswith('--data_dir=')]
  data_dir = data_dirs[-1] if data_dirs else os.environ.get('TFDS_DATA_DIR')
  if data_dir:
    seed_downloads(data_dir)
  forbid_downloads()  # Without a data dir (a reader of a workdir) it only guards.
  from nplm.console import main as nplm_main
  sys.argv = ['nplm', *argv]
  nplm_main()


if __name__ == '__main__':
  main(sys.argv[1:])
