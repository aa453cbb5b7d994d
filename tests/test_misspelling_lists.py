"""Lists of misspellings read as they are published (nplm.use.misspelling_lists), a list that
is none of the forms refused by its line, and codespell's list by name."""

import sys
from pathlib import Path

import pytest

from nplm.errors import ConfigError
from nplm.use.misspelling_lists import read_pairs


def test_each_published_form_gives_its_pairs(tmp_path):
  listed = tmp_path / 'list.txt'
  listed.write_text('# a pair a line\nrecieve receive\n\n  teh\tthe \n'
                    '# Wikipedia\'s For machines\nadress->address, dress\n'
                    '# codespell\'s dictionary.txt\nabck->back, aback,\nbcak->back,\n'
                    '# Norvig\'s spell-testset\nreceive: recieve recive\n'
                    '# Mitton\'s Birkbeck\n$believe\nbeleive\nbelive\n$their\nthier\n'
                    'hte the\n')
  assert read_pairs(str(listed)) == [
      ('recieve', 'receive'), ('teh', 'the'), ('adress', 'address'), ('adress', 'dress'),
      ('abck', 'back'), ('abck', 'aback'), ('bcak', 'back'),
      ('recieve', 'receive'), ('recive', 'receive'), ('beleive', 'believe'),
      ('belive', 'believe'), ('thier', 'their'), ('hte', 'the')]


@pytest.mark.parametrize('text,says', [
    ('recieve receive\nteh\n', 'list.txt:2 is not a pair'),  # One word, no $ before it.
    ('a b c\n', 'list.txt:1 is not a pair'),
    ('x->\n', 'list.txt:1 is not a pair'),
    ('x->a,,\n', 'list.txt:1 is not a pair'),
    ('x->,\n', 'list.txt:1 is not a pair'),
    ('receive:\n', 'list.txt:1 is not a pair'),
    ('$\nteh\n', 'list.txt:1 is not a pair'),
    ('# nothing\n\n$the\n', 'holds no pairs'),
    ('{"teh": "the",\n "x": }', 'list.txt:2 is not JSON'),  # A JSON object typed -> meant.
    ('{"teh": "the"', 'list.txt:1 is not JSON'),
    ('{"teh": 3}', "'teh': 3 is not a meant word"),
    ('{"teh": "the,"}', "'teh': 'the,' is not a meant word"),
    ('{"teh": []}', "'teh': \\[\\] is not a meant word"),
    ('{}', 'holds no pairs'),
    ('[{"teh": "the"}]', 'list.txt is JSON but not an object')])
def test_a_list_of_no_form_is_refused_in_one_line_by_its_line(tmp_path, text, says):
  listed = tmp_path / 'list.txt'
  listed.write_text(text)
  with pytest.raises(ConfigError, match=says) as refused:
    read_pairs(str(listed))
  assert '\n' not in str(refused.value)


def test_a_file_that_cannot_be_read_is_refused_saying_why(tmp_path):
  listed = tmp_path / 'list.txt'
  listed.write_bytes(b'caf\xe9 cafe\n')
  with pytest.raises(ConfigError, match='cannot read --misspellings=.*list.txt .*utf-8'):
    read_pairs(str(listed))
  with pytest.raises(ConfigError, match='No such file'):
    read_pairs(str(tmp_path / 'missing.txt'))


def test_a_json_object_gives_a_pair_for_each_meant_word(tmp_path):
  listed = tmp_path / 'dictionary.json'
  listed.write_text('{"recieve": "receive", "adress": "address,dress",\n'
                    ' "thier": ["their", "there"]}')
  assert read_pairs(str(listed)) == [('recieve', 'receive'), ('adress', 'address'),
                                     ('adress', 'dress'), ('thier', 'their'),
                                     ('thier', 'there')]


def test_codespell_names_the_codespell_packages_list_unless_a_file_has_that_name(
    tmp_path, monkeypatch):
  import codespell_lib
  installed = Path(codespell_lib.__file__).parent / 'data' / 'dictionary.txt'
  monkeypatch.chdir(tmp_path)
  Path('codespell').mkdir()  # A checkout of codespell, say: no list.
  pairs = read_pairs('codespell')
  assert pairs == read_pairs(str(installed)) and len(pairs) > 60_000
  assert ('abck', 'back') in pairs and ('abck', 'aback') in pairs
  Path('codespell').rmdir()
  Path('codespell').write_text('teh the\n')  # A file of that name, in the user's directory.
  assert read_pairs('codespell') == [('teh', 'the')]


def test_codespell_not_installed_is_refused_saying_how_to_install_it(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  monkeypatch.setitem(sys.modules, 'codespell_lib', None)  # Not importable.
  with pytest.raises(ConfigError, match='pip install codespell, or give a file'):
    read_pairs('codespell')
