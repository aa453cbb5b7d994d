"""Lists of misspellings, (typed, meant) pairs, in the forms they are published in, for the
channel learned from them (nplm.use.learned_channel; nplm correct --misspellings):

    recieve receive          a pair a line, any whitespace between
    recieve->receive         Wikipedia's "Lists of common misspellings/For machines"
    adress->address, dress     ('a, b': a pair for each word)
    abck->back, aback,       codespell's dictionary.txt (a comma may end the line)
    receive: recieve recive  Norvig's spell-testset: the word, then its misspellings
    $receive                 Mitton's Birkbeck corpus: the word after '$', then its
    recieve                    misspellings one a line
    recive
    {"recieve": "receive",   a JSON object, typed -> meant ('a,b' or a list: a pair for
     "adress": "address,dress"}  each), as npm's misspellings package ships Wikipedia's

Blank lines and lines starting with '#' are skipped. `--misspellings=codespell`, where no file
has that name, reads the list of the codespell package (its data/dictionary.txt: 65,000
misspellings found in code and its documentation; pip install codespell), as --flagfile=NAME
reads a recipe.
"""

import importlib.resources
import json
from pathlib import Path

from nplm.errors import ConfigError

CODESPELL = 'codespell'
FORMS = ('"typed meant", "typed->meant", "meant: typed typed" or "$meant" then typed lines, '
         'or a JSON object {"typed": "meant"}')


def read_pairs(path: str) -> list[tuple[str, str]]:
  """The (typed, meant) pairs of a list in any of the module docstring's forms."""
  try:
    text = list_file(path).read_text(encoding='utf-8')
  except (OSError, UnicodeDecodeError) as error:
    reason = getattr(error, 'strerror', None) or error
    raise ConfigError(f'cannot read --misspellings={path} ({reason}): give a text file of '
                      f'{FORMS}') from None
  if text.lstrip()[:1] in ('{', '['):  # JSON: an array is refused, not read as lines.
    return _object_pairs(path, text)
  pairs, heading = [], None  # heading: the Birkbeck word the lines below misspell.
  for number, line in enumerate(text.splitlines(), 1):
    line = line.strip()
    if not line or line.startswith('#'):
      continue
    if line.startswith('$'):
      heading = line[1:].strip() or None
      found = [] if heading else None
    else:
      found = _line_pairs(line, heading)
    if found is None:
      raise ConfigError(f'{path}:{number} is not a pair: {line[:60]!r}; write {FORMS}')
    pairs += found
  if not pairs:
    raise ConfigError(f'--misspellings={path} holds no pairs: write {FORMS}')
  return pairs


def list_file(path: str) -> Path:
  """The file a --misspellings value names: that file, or codespell's list where no file is
  named 'codespell' (a directory of that name is not a list)."""
  if path != CODESPELL or Path(path).is_file():
    return Path(path)
  try:
    return Path(str(importlib.resources.files('codespell_lib') / 'data' / 'dictionary.txt'))
  except ModuleNotFoundError:
    raise ConfigError('--misspellings=codespell reads the list of the codespell package, '
                      'which is not installed: pip install codespell, or give a file') from None


def _line_pairs(line: str, heading: str | None) -> list[tuple[str, str]] | None:
  """A line's pairs, None if it is none of the forms."""
  typed, arrow, meant = line.partition('->')
  if arrow:
    words = [word.strip() for word in meant.split(',')]
    if len(words) > 1 and not words[-1]:  # codespell's 'a, b,'.
      words.pop()
    return [(typed.strip(), word) for word in words] if typed.strip() and all(words) else None
  meant, colon, typed = line.partition(':')
  if colon:
    forms = typed.split()
    return [(form, meant.strip()) for form in forms] if meant.strip() and forms else None
  fields = line.split()
  if len(fields) == 2:
    return [(fields[0], fields[1])]
  return [(fields[0], heading)] if len(fields) == 1 and heading else None


def _object_pairs(path: str, text: str) -> list[tuple[str, str]]:
  """The pairs of a JSON object typed -> 'meant' or 'a,b' or a list of meant words."""
  try:
    listed = json.loads(text)
  except json.JSONDecodeError as error:
    raise ConfigError(f'{path}:{error.lineno} is not JSON ({error.msg}); write {FORMS}'
                      ) from None
  if not isinstance(listed, dict):
    raise ConfigError(f'{path} is JSON but not an object typed -> meant; write {FORMS}')
  pairs = []
  for typed, meant in listed.items():
    words = meant.split(',') if isinstance(meant, str) else meant
    if not (isinstance(words, list) and typed.strip() and words
            and all(isinstance(w, str) and w.strip() for w in words)):
      raise ConfigError(f'{path}: {typed!r}: {meant!r} is not a meant word or words; write '
                        f'{FORMS}')
    pairs += [(typed.strip(), word.strip()) for word in words]
  if not pairs:
    raise ConfigError(f'--misspellings={path} holds no pairs: write {FORMS}')
  return pairs
