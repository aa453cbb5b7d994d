"""Issue 42's cases for experiments.fault_injection --mode=cases (the lead adds CASES after
fault_inputs.CASES): the smaller frictions a new user met, as a user meets them, each row
saying what came of it, so that an old checkout's table and a new one's read side by side."""

import json
import re
import signal
import sys

import numpy as np

from experiments.fault_harness import nplm, run
from experiments.fault_inputs import watched

ESCAPE = '\x1b[31m'  # An ANSI escape: red text on a terminal.
# A sentence's end as a reader sees it: '.', '!' or '?' (closers after it), then a space.
SENTENCE_MARK = re.compile(r'[.!?]["\'”’»)\]}]*(?=\s|$)')


def _python(c, code: str) -> tuple[str, dict]:
  """`python -c code` against the checkout, shown as typed; what it raises is printed as
  'raised <type>: <message>', the way a user's script would meet it."""
  caught = (f'try:\n  {code}\nexcept Exception as error:\n'
            "  print(f'raised {type(error).__name__}: {error}')")
  shown = f'python -c "{code}"'.replace(str(c.out), 'OUT')
  return shown, run([sys.executable, '-c', caught], c.checkout)


def case_frictions_typed(c) -> None:
  """42.1-3: a mistyped command, a mistyped setting, one sentence scored."""
  argv = nplm('trian')
  result = run(argv, c.checkout)
  c.row('42.1 nplm trian (a typo)', argv, result, f'{len(result["stderr"])} stderr lines')
  for case, code in (
      ('42.2 nplm.train with a mistyped setting',
       "import nplm; nplm.train({'datset': 'text:corpus', 'workdir': 'runs/x'})"),
      ('42.2 Model.generate with a mistyped keyword',
       f"import nplm; nplm.load('{c.out / 'reference'}').generate(lenght=5)")):
    shown, result = _python(c, code)
    c.row(case, shown, result, result['stdout'].strip()[-100:])
  code = (f"import nplm; m = nplm.load('{c.out / 'reference'}'); "
          "print(type(m.score('w1 w2')).__name__, type(m.score(['w1 w2'])).__name__)")
  shown, result = _python(c, code)
  c.row("42.3 Model.score('w1 w2') and Model.score(['w1 w2'])", shown, result,
        f'types: {result["stdout"].strip()}')


def case_frictions_neighbours(c) -> None:
  """42.4: neighbours' words as arguments; a --lowercase model's words typed capitalized."""
  argv = nplm('neighbours', f'--workdir={c.out / "reference"}', 'w1', 'w2', '--k=3')
  result = run(argv, c.checkout)
  c.row('42.4 neighbours w1 w2 (words as arguments)', argv, result,
        f'queries: {_queries(result)}')
  trained = c.train('frictions_lower', lowercase=True)
  argv = nplm('neighbours', f'--workdir={c.out / "frictions_lower"}', '--words=W1,w2', '--k=3')
  result = run(argv, c.checkout)
  c.row('42.4 neighbours --words=W1,w2 of a --lowercase run', argv, result,
        f'training rc {trained["rc"]}; queries: {_queries(result)}')


def _queries(result: dict) -> str:
  return '; '.join(l for l in result['stdout'].splitlines() if l and not l.startswith(' '))


def case_frictions_control(c) -> None:
  """42.5: an ANSI escape in the text scored, ranked and predicted from."""
  reference, typed = c.out / 'reference', f'w1 {ESCAPE}w2\x1b[0m w3'
  for program, words in (('score', [typed]), ('rank', [typed, 'w1 w2 w3']),
                         ('predict', [typed])):
    argv = nplm(program, f'--workdir={reference}', *words)
    result = run(argv, c.checkout)
    shown = [a.encode('unicode_escape').decode() for a in argv]  # The table stays plain.
    raw = '\x1b' in result['stdout'] + ''.join(result['stderr'])
    c.row(f'42.5 {program} of text holding an ANSI escape', shown, result,
          f'raw ESC printed: {"YES" if raw else "no"}; '
          f'{result["stdout"].splitlines()[0][-44:] if result["stdout"] else ""!r}')


def case_frictions_generate(c) -> None:
  """42.6-7: generate --length=1000000000 and a signal after 10 s; --sentences=2 on a text
  dataset whose lines are paragraphs of sentences."""
  for name, sig in (('SIGTERM', signal.SIGTERM), ('Ctrl-C', signal.SIGINT)):
    argv = nplm('generate', f'--workdir={c.out / "reference"}', '--length=1000000000')
    result, seen = watched(argv, c.checkout, signal_at=(10, sig))
    c.row(f'42.6 generate --length=1000000000, {name} 10 s after the start', argv, result,
          f'{len(result["stdout"]):,} characters printed; {seen}')
  corpus = _paragraphs(c.out / 'paragraphs')
  trained = c.train('frictions_paragraphs', dataset=f'text:{corpus}',
                    data_dir=c.out / 'data_paragraphs')
  argv = nplm('generate', f'--workdir={c.out / "frictions_paragraphs"}', '--sentences=2',
              '--length=200', '--seed=1')
  result = run(argv, c.checkout)
  text = result['stdout']
  c.row('42.7 generate --sentences=2, lines of several sentences', argv, result,
        f'training rc {trained["rc"]}; {len(SENTENCE_MARK.findall(text))} sentence marks, '
        f'{len(text.splitlines())} lines printed')


def _paragraphs(directory):
  """A text:DIR corpus whose lines hold 3-5 sentences of 3-7 words 'w0' … 'w39' each, each
  ending '.', '!' or '?' (a token of its own)."""
  rng = np.random.default_rng(42)
  directory.mkdir(parents=True, exist_ok=True)
  for split, count in (('train', 1500), ('valid', 150), ('test', 150)):
    lines = [' '.join(' '.join(f'w{w}' for w in rng.integers(0, 40, rng.integers(3, 8)))
                      + ' ' + rng.choice(['.', '.', '!', '?'])
                      for _ in range(rng.integers(3, 6)))
             for _ in range(count)]
    (directory / f'{split}.txt').write_text(''.join(line + '\n' for line in lines))
  return directory


def case_frictions_compare(c) -> None:
  """42.8: compare a run stopped by --max_steps before its first validation and a
  character run beside the reference."""
  trained = [c.train('frictions_max_steps', max_steps=5)['rc'],
             c.train('frictions_chars', tokens='chars')['rc']]
  runs = [c.out / name for name in ('reference', 'frictions_max_steps', 'frictions_chars')]
  argv = nplm('compare', *runs, f'--out={c.out / "frictions_compare.png"}', '--json')
  result = run(argv, c.checkout)
  try:
    rows = json.loads(result['stdout'])['runs']
  except (ValueError, KeyError):
    rows = []
  seen = '; '.join(f'{r["workdir"].rsplit("/", 1)[-1]}: valid {r["ppl"]["valid"]}, bpc '
                   f'{(r.get("bpc") or {}).get("valid")}, status {r.get("status", "not shown")}'
                   for r in rows)
  argv = nplm('compare', *runs, f'--out={c.out / "frictions_compare.png"}')
  table = run(argv, c.checkout)
  header = next((l for l in table['stdout'].splitlines() if l.startswith('workdir')), '')
  c.row('42.8 compare: a --max_steps run before validation, a character run', argv, table,
        f'training rc {trained}; {seen}; columns: {", ".join(re.split(r"  +", header))}')


CASES = (case_frictions_typed, case_frictions_neighbours, case_frictions_control,
         case_frictions_generate, case_frictions_compare)
