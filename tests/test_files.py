"""Files written whole or not at all (nplm.files), with a stop request landing at its worst
lines: while the file is written, and just after its rename, where the stop is what the
command must report (a stop there once came out as a FileNotFoundError traceback)."""

import os

import pytest
from matplotlib.figure import Figure

from nplm import files


class Stop(BaseException):
  """What a stop request raises (KeyboardInterrupt, nplm.stop_requests.Interrupted)."""


def test_a_stop_while_writing_leaves_the_old_file_and_nothing_else(tmp_path):
  path = tmp_path / 'vocab.txt'
  path.write_text('the old words\n')
  with pytest.raises(Stop):
    with files.atomic_file(path) as f:
      f.write('half of the new')
      raise Stop
  assert path.read_text() == 'the old words\n'
  assert os.listdir(tmp_path) == ['vocab.txt']


@pytest.mark.parametrize('write', [
    lambda path: files.write_json_atomically(path, {'words': 3}),
    lambda path: files.write_bytes_atomically(path, b'{"words": 3}'),
    lambda path: files.save_figure_atomically(Figure(), path),
], ids=['json', 'bytes', 'figure'])
def test_a_stop_just_after_the_rename_is_what_the_writer_raises(tmp_path, monkeypatch, write):
  """The new file is in place whole, no temporary file is left, and the stop comes out."""
  path = tmp_path / 'summary.json'
  path.write_text('the old summary\n')
  rename = os.replace

  def renamed_then_stopped(source, target):
    rename(source, target)
    raise Stop

  monkeypatch.setattr(files.os, 'replace', renamed_then_stopped)
  with pytest.raises(Stop):
    write(path)
  assert path.read_bytes() != b'the old summary\n' and path.stat().st_size > 0
  assert os.listdir(tmp_path) == ['summary.json']
  assert oct(path.stat().st_mode & 0o777) == oct(0o644)
