"""The run-file cases of experiments.fault_injection --mode=cases (issue 42): a workdir's
summary.json deleted, cut short or edited; run.json lost, then the run resumed with other
flags; another run's tokenizer.model; best/ deleted; subword sizes SentencePiece cannot
learn, and a training split of one 2.4 MB line; --keep_checkpoints; a disk that fills during
the final evaluation. Each row says what the
tools read, so that the table of an old checkout and of a new one can be read side by side."""

import contextlib
import json
import random
import shutil
import subprocess
from pathlib import Path

from experiments.fault_harness import Child, compare, nplm, run, summary_of

# Ends between validations, its last update better than its best validated (step 400).
REPORTS_LAST = {'max_steps': 500, 'eval_every': 200}
# Its validation worsens after the first epoch: the best (step 376) is not the last (1128).
REPORTS_BEST = {'learning_rate': 0.03}


def _line(result: dict, text: str) -> str:
  return next((l.strip() for l in result['stdout'].splitlines() if text in l), f'no {text!r}')


def _trained(c, name: str, **flag_values) -> Path:
  argv = c.train_argv(name, **flag_values)
  result = run(argv, c.checkout)
  summary = summary_of(c.out / name) or {}
  c.row(f'42 setup: {name}', argv, result, f'reported: {summary.get("reported")}')
  return c.out / name


def _score(c, workdir: Path, text: str) -> tuple[list[str], dict, str]:
  """nplm score of `text`: its argv, result and the line scoring it."""
  argv = nplm('score', f'--workdir={workdir}', text)
  result = run(argv, c.checkout)
  return argv, result, _line(result, text)


def _evaluate(c, workdir: Path) -> tuple[list[str], dict]:
  argv = nplm('evaluate', f'--workdir={workdir}')
  return argv, run(argv, c.checkout)


def _copy(c, source: Path, name: str) -> Path:
  target = c.out / name
  shutil.copytree(source, target)
  return target


def _damage_summary(workdir: Path, damage: str) -> None:
  path = workdir / 'summary.json'
  if damage == 'deleted':
    path.unlink()
  elif damage == 'cut short':
    text = path.read_text()
    path.write_text(text[:len(text) // 2])
  else:  # Its `reported` edited: the best's step instead of the last update's.
    summary = json.loads(path.read_text())
    summary['reported'] = {**summary['reported'], 'parameters': 'best',
                           'step': summary['best_step']}
    path.write_text(json.dumps(summary, indent=2))


def case_summary_damaged(c) -> None:
  """42.1: summary.json deleted, cut short, or its `reported` edited: what evaluate and score
  read, and whether rerunning the train command rewrites it."""
  source = _trained(c, 'summary_last', **REPORTS_LAST)
  _, result = _evaluate(c, source)
  want = _line(result, 'valid:')
  for damage in ('deleted', 'cut short', 'reported edited'):
    name = f'summary_{damage.replace(" ", "_")}'
    workdir = _copy(c, source, name)
    _damage_summary(workdir, damage)
    argv, result = _evaluate(c, workdir)
    got = _line(result, 'valid:')
    c.row(f'42.1 summary.json {damage}: evaluate', argv, result,
          f'{got} ({"as reported" if got == want else f"REPORTED: {want}"})')
    argv, result, line = _score(c, workdir, 'w0 w1 w2 w3')
    c.row(f'42.1 summary.json {damage}: score', argv, result, line)
    argv = c.train_argv(name, **REPORTS_LAST)
    result = run(argv, c.checkout)
    c.row(f'42.1 summary.json {damage}: the train command rerun', argv, result,
          f'reported: {(summary_of(workdir) or {}).get("reported")}')
    argv, result = _evaluate(c, workdir)
    got = _line(result, 'valid:')
    c.row(f'42.1 summary.json {damage}: evaluate after the rerun', argv, result,
          f'{got} ({"as reported" if got == want else f"REPORTED: {want}"})')


def case_run_json_lost(c) -> None:
  """42.2: a run stopped by --max_steps loses its run.json, then is resumed with another
  --learning_rate, another --hidden_size, or the same flags."""
  stopped = _trained(c, 'run_json_stopped', max_steps=200)
  recorded = json.loads((stopped / 'run.json').read_text())
  for case, flag_values in (('--learning_rate=0.5', {'learning_rate': 0.5}),
                            ('--hidden_size=20', {'hidden_size': 20}), ('the same flags', {})):
    name = f'run_json_lost_{len(c.rows)}'
    workdir = _copy(c, stopped, name)
    (workdir / 'run.json').unlink()
    (workdir / 'summary.json').unlink()  # The stopped run's: only the resumed one's counts.
    argv = c.train_argv(name, **flag_values)
    result = run(argv, c.checkout)
    path = workdir / 'run.json'
    now = json.loads(path.read_text()) if path.exists() else None
    restored = ('none' if now is None else 'the run\'s' if now == recorded
                else 'A NEW ONE (this command\'s config)')
    c.row(f'42.2 run.json deleted, resumed with {case}', argv, result,
          f'{len(result["stderr"])} stderr lines; run.json now: {restored}; numbers '
          f'{compare(summary_of(workdir), c.reference)}')


def case_tokenizer_swapped(c) -> None:
  """42.3: a run's tokenizer.model replaced by another run's: score and evaluate read it?"""
  runs = {size: _trained(c, f'bpe{size}', tokenizer='bpe', subword_vocab_size=size,
                         max_steps=100) for size in (60, 20)}  # 'w199' three pieces or four.
  workdir, text = runs[60], 'w199 w288 w177'
  _, _, own = _score(c, workdir, text)
  shutil.copy(runs[20] / 'tokenizer.model', workdir / 'tokenizer.model')
  argv, result, line = _score(c, workdir, text)
  c.row('42.3 tokenizer.model of another run: score', argv, result, f'{line} (its own: {own})')
  argv, result = _evaluate(c, workdir)
  c.row('42.3 tokenizer.model of another run: evaluate (ids, no tokenizer)', argv, result,
        _line(result, 'valid:'))
  argv = c.train_argv(workdir.name, tokenizer='bpe', subword_vocab_size=60, max_steps=100)
  c.row('42.3 tokenizer.model of another run: the train command rerun', argv,
        run(argv, c.checkout), '')
  argv, result, line = _score(c, workdir, text)
  c.row('42.3 score after the rerun', argv, result,
        f'{line} ({"as its own" if line == own else "OTHER"})')


def case_best_deleted(c) -> None:
  """42.4: a finished run's best/ deleted (its step's copy in checkpoints/ intact): what
  evaluate reads, and the run rerun."""
  source = _trained(c, 'reports_best', **REPORTS_BEST)
  _, result = _evaluate(c, source)
  want = _line(result, 'valid:')
  workdir = _copy(c, source, 'best_deleted')
  shutil.rmtree(workdir / 'best')
  argv, result = _evaluate(c, workdir)
  got = _line(result, 'valid:')
  c.row('42.4 best/ deleted: evaluate', argv, result,
        f'{got} ({"as reported" if got == want else f"REPORTED: {want}"})')
  argv = c.train_argv(workdir.name, **REPORTS_BEST)
  result = run(argv, c.checkout)
  best = sorted(p.name for p in (workdir / 'best').glob('*')) if (workdir / 'best').exists() else []
  c.row('42.4 best/ deleted: the finished run rerun', argv, result,
        f'numbers {compare(summary_of(workdir), summary_of(source) or {})}; best/: {best}')


def _long_line_corpus(directory: Path) -> None:
  """A training split of one 2.4 MB line (valid and test: short lines of its words)."""
  rng = random.Random(0)
  words = [f'w{rng.randrange(300)}' for _ in range(600_000)]
  directory.mkdir(parents=True)
  (directory / 'train.txt').write_text(' '.join(words) + '\n')
  for split in ('valid', 'test'):
    (directory / f'{split}.txt').write_text(''.join(
        ' '.join(rng.choice(words) for _ in range(10)) + '\n' for _ in range(50)))


def case_subword_sizes(c) -> None:
  """42.5: --subword_vocab_size=1, and a training split of one 2.4 MB line (over
  SentencePiece's 4192-byte sentences)."""
  argv = c.train_argv('bpe1', tokenizer='bpe', subword_vocab_size=1, data_dir=c.out / 'data_bpe1')
  c.row('42.5 --tokenizer=bpe --subword_vocab_size=1', argv, run(argv, c.checkout), '')
  _long_line_corpus(c.out / 'long_line')
  argv = c.train_argv('long_line', dataset=f'text:{c.out / "long_line"}',
                      data_dir=c.out / 'data_long', tokenizer='bpe', subword_vocab_size=2000,
                      max_steps=5)
  result = run(argv, c.checkout)
  summary = summary_of(c.out / 'long_line') or {}
  c.row('42.5 train split one 2.4 MB line, --tokenizer=bpe --subword_vocab_size=2000', argv,
        result, f'|V| = {summary.get("vocab_size")}, valid ppl {summary.get("valid_ppl")}')


def case_keep_checkpoints(c) -> None:
  """42.6: --checkpoint_every=1 --keep_checkpoints=1 keeps one periodic checkpoint besides
  the best's, and the run resumes to the reference's numbers."""
  name = 'keep_one'
  run(c.train_argv(name, max_steps=376), c.checkout)  # The first epoch: its best.
  argv = c.train_argv(name, max_steps=390, checkpoint_every=1, keep_checkpoints=1)
  result = run(argv, c.checkout)
  kept = sorted(p.name for p in (c.out / name / 'checkpoints').glob('*'))
  c.row('42.6 --checkpoint_every=1 --keep_checkpoints=1', argv, result,
        f'checkpoints/: {kept}; best/: {sorted(p.name for p in (c.out / name / "best").glob("*"))}')
  argv = c.train_argv(name, keep_checkpoints=1)
  result = run(argv, c.checkout)
  c.row('42.6 resumed to the end', argv, result,
        f'numbers {compare(summary_of(c.out / name), c.reference)}')


def case_disk_full(c) -> None:
  """42: the disk fills during the final evaluation (a 30 MB tmpfs, filled once the final
  evaluation starts; mounting needs root), then the run is rerun with the space freed."""
  disk = c.out / 'small_disk'
  disk.mkdir()
  mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=30M', 'tmpfs', str(disk)],
                           capture_output=True, text=True)
  if mounted.returncode:
    c.row('42 disk full in the final evaluation', 'mount -t tmpfs', {'rc': mounted.returncode,
          'stdout': '', 'stderr': mounted.stderr.splitlines()}, 'not run: no tmpfs mounted')
    return
  try:
    name = 'small_disk/run'
    argv = c.train_argv(name, eval_batch_size=4)
    child = Child(argv, c.checkout)
    child.wait_until(lambda: child.line('final evaluation') is not None)
    filler = disk / 'filler'
    with open(filler, 'wb') as out, contextlib.suppress(OSError):
      while True:
        out.write(bytes(2 ** 20))
    result = child.finish()
    c.row('42 disk full in the final evaluation', argv, result,
          f'{sum("Traceback" in l for l in result["stderr"])} traceback lines')
    filler.unlink()
    result = run(argv, c.checkout)
    c.row('42 … rerun with the space freed', argv, result,
          f'numbers {compare(summary_of(c.out / name), c.reference)}')
  finally:
    subprocess.run(['umount', '-l', str(disk)], check=False)


CASES = (case_summary_damaged, case_run_json_lost, case_tokenizer_swapped, case_best_deleted,
         case_subword_sizes, case_keep_checkpoints, case_disk_full)
