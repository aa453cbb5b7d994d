"""The K >= 1 runs one loop trains (nplm.training.loop): a lone run is K = 1; models trained
together (K > 1) have their states stacked along a leading axis, one compiled step updating
them all. Each run keeps its own workdir, checkpoints, metrics and stop
(nplm.run_files.model_run); each method here does for every run still training what a lone
run does for itself, so that the loop reads as one model's.
"""

import logging

import jax
import jax.numpy as jnp
import numpy as np

from nplm import stop_requests
from nplm.config import Config
from nplm.data.corpus import Corpus
from nplm.ngram import spelling
from nplm.perplexity import exploded, perplexity
from nplm.run_files import plots
from nplm.run_files.checkpoint import CheckpointError, IncompatibleCheckpointError, abstract_of
from nplm.run_files.model_run import ModelRun
from nplm.run_files.summary import RunStatus, run_summary, write_summary
from nplm.display import counted
from nplm.training import optimizer, schedules

log = logging.getLogger(__name__)


def periodic_validation(config: Config, valid_tokens: int) -> dict:
  """What each epoch-end validation scores: the first --valid_tokens_per_eval tokens of the
  valid split, or all of its `valid_tokens` (0, or more than it has)."""
  wanted = config.valid_tokens_per_eval
  if wanted > valid_tokens:
    log.info('--valid_tokens_per_eval=%d is more than the valid split holds (%s): each epoch '
             'validates on the whole split', wanted, counted(valid_tokens, 'token'))
  tokens = min(wanted, valid_tokens) if wanted else valid_tokens
  return {'split': 'valid', 'tokens': tokens, 'of': valid_tokens}


def validates(config: Config, language_model: bool, evaluated: list[str]) -> bool:
  """Whether the run validates (each epoch, or --eval_every): a language model always (its
  learning curve); word vectors only where something reads it (--patience, --eval_every,
  --lr_schedule=plateau) or perplexities were asked for (--eval_splits): a word2vec run
  would otherwise spend most of its time scoring figures no one reads."""
  return (language_model or bool(evaluated) or config.patience > 0 or bool(config.eval_every)
          or schedules.reads_validations(config))


class Runs:
  """The runs of one loop, in order; `all[k]` is model k's."""

  def __init__(self, configs: list[Config], corpus: Corpus, main: bool, validation: dict,
               started: float, language_model: bool = True):
    """Claims every workdir (process 0, `main`, alone writes the runs' files); a refused one
    leaves none of them locked. `validation`: what each epoch validates on
    (periodic_validation); `started`: the invocation's start (the runs' wall clock);
    `language_model`: its validations are a language model's perplexities (word vectors'
    are not: no warning above |V|)."""
    self.corpus, self.main, self.count, self.all = corpus, main, len(configs), []
    self.validation, self.language_model = validation, language_model
    try:
      for k, config in enumerate(configs):
        name = f'[{k}] ' if self.count > 1 else ''
        self.all.append(ModelRun(config, corpus, main, name, started))
      # The open vocabulary's spelling of unknown words: one per corpus, in every workdir.
      spelt = spelling.of_corpus(corpus)
      self.spelling_nll = spelling.split_costs(spelt, corpus)
      if main:
        for run in self.all:
          spelling.save(spelt, run.workdir)
    except BaseException:
      self.close()
      raise

  def close(self) -> None:
    for run in self.all:
      run.close()

  def join(self, trees):
    """One model's tree as it is; K models' stacked along a new leading axis."""
    if self.count == 1:
      return trees[0]
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)

  def member(self, tree, k: int):
    return tree if self.count == 1 else jax.tree.map(lambda leaf: leaf[k], tree)

  @property
  def training(self) -> list[int]:
    """The runs still training: not diverged, not stopped early, epochs left."""
    return [k for k, run in enumerate(self.all) if run.training]

  @property
  def epochs_done(self) -> int:
    return self.all[self.training[0]].progress.epochs_done

  # --- the start --------------------------------------------------------------------

  def start_or_resume(self, feed) -> tuple:
    """(states, step keys, step): each run's newest good checkpoint's state or a new one
    (the feed's `create_state(key)`), joined, and the step they are all at. Keeps one run's
    state's shapes as `template` (to restore into, and to count). A resumed run restores
    into the new state's shapes and layout without making it: no second state in memory
    beside it."""
    states, run_rngs = [], []
    for run in self.all:
      init_rng, run_rng = jax.random.split(jax.random.key(run.config.seed))
      restored = run.checkpoints.restore_latest(feed.restore_target(init_rng))
      run.resume(restored)
      if restored is not None:
        state = restored[0]
        log.info('%sResumed from %s at step %d.', run.name, run.workdir, int(state.step))
      else:
        state = feed.create_state(init_rng)
      stop_requests.check()
      states.append(state)
      run_rngs.append(run_rng)
    self.template = abstract_of(states[0])  # Shapes: no state kept beside the joined.
    return self.join(states), self.join(run_rngs), self.common_step(states)

  def common_step(self, states) -> int:
    """The step every run still training is at: they train in lockstep."""
    steps = {int(s.step) for run, s in zip(self.all, states) if run.training}
    if len(steps) > 1:
      behind = [str(run.workdir) for run, s in zip(self.all, states)
                if run.training and int(s.step) < max(steps)]
      raise IncompatibleCheckpointError(
          f'the models to train together were saved at different steps ({sorted(steps)}); '
          f'finish {", ".join(behind)} alone (nplm train with its config and '
          'workdir), or delete those workdirs to train them from the start')
    return steps.pop() if steps else int(states[0].step)

  # --- training -----------------------------------------------------------------------

  def save_unsaved(self, states, step: int) -> None:
    """A checkpoint of every run still training that has none at this step."""
    for k in self.training:
      if self.all[k].saved_step != step:
        self.all[k].save(self.member(states, k))

  def check_losses(self, losses: np.ndarray, step: int) -> None:
    """A run whose training loss has exploded stops (its state of this step is not saved)."""
    for k in self.training:
      if exploded(float(losses[k]), self.corpus.vocab.size):
        self.all[k].diverge(f'the training loss is {float(losses[k])} at step {step}')

  def count_time(self, seconds: float, examples: int) -> None:
    for k in self.training:
      self.all[k].progress.train_seconds += seconds
      self.all[k].progress.train_examples += examples

  def hyperparameters(self, steps_per_epoch: int) -> list[dict]:
    """Each run's hyperparameters for its next updates (optimizer.hyperparameters_of): its
    config's, and its --lr_schedule=plateau factor so far."""
    return [optimizer.hyperparameters_of(run.config, steps_per_epoch, run.progress.lr_scale)
            for run in self.all]

  def write_train_metrics(self, losses: np.ndarray, step: int, rate: float,
                          steps_per_epoch: int) -> None:
    hyperparameters = self.hyperparameters(steps_per_epoch)
    for k in self.training:
      run = self.all[k]
      run.writer.write('train', step, loss=float(losses[k]), examples_per_second=rate,
                       learning_rate=float(schedules.learning_rate_at(
                           run.config, step - 1, hyperparameters[k])))

  def unvalidated(self, step: int, runs: list[int] | None = None) -> list[int]:
    """Of `runs` (default: those still training), the runs that have not validated `step`'s
    parameters; a run stopped early or diverged never validates again."""
    runs = self.training if runs is None else runs
    return [k for k in runs if not self.all[k].diverged
            and not self.all[k].progress.stopped_early
            and self.all[k].last_validated_step != step]

  def validation_ppl(self, nll: float) -> float:
    return perplexity(nll, self.validation['tokens'])['ppl']

  def record_validation(self, nll: np.ndarray, runs: list[int], step: int,
                        epoch: float) -> None:
    """Each of `runs`' validation (Σ -log p over the tokens `validation` names, `nll[k]`) at
    `step`, `epoch` epochs in: its best noted, its stop and its rate's decay decided; one
    whose perplexity exploded stops. The caller saves the states after (save_latest), a
    new best as the best too."""
    tokens, of = self.validation['tokens'], self.validation['of']
    for k in runs:
      run, ppl = self.all[k], perplexity(nll[k], tokens)['ppl']
      if exploded(nll[k] / tokens, self.corpus.vocab.size):
        run.diverge(f'the validation perplexity is {ppl} at step {step}')
        continue
      history = run.progress.valid_ppl_history
      decays = schedules.plateau_decays(run.config, ppl, min(history) if history else None)
      run.record_validation(ppl, tokens, of, step, epoch, decays)
      run.writer.validation(step, epoch, ppl, tokens, of)
      if self.language_model and ppl > self.corpus.vocab.size:  # Exact, yet unusable.
        log.warning('%svalid perplexity %.2f is above |V| = %d, a uniform guess\'s: this model '
                    'predicts worse than chance (a learning rate or recipe too strong for its '
                    'size?)', run.name, ppl, self.corpus.vocab.size)

  def finished_epoch(self, step: int) -> list[int]:
    """The runs that trained up to `step`, an epoch's end: those still training, and those
    that a validation at `step` stopped early."""
    return [k for k, run in enumerate(self.all) if run.training or (
        run.progress.stopped_early and run.last_validated_step == step)]

  def end_epoch(self, runs: list[int], epochs: int) -> None:
    """`runs` (those that trained the epoch) have finished `epochs` epochs."""
    for k in runs:
      if not self.all[k].diverged:
        self.all[k].progress.epochs_done = epochs

  def save_latest(self, states, runs: list[int]) -> None:
    """The latest checkpoint of each of `runs` (not diverged), its progress as it is now;
    also its best, where the validation of this step was its best."""
    for k in runs:
      run = self.all[k]
      if not run.diverged:
        state = self.member(states, k)
        run.save(state, best=run.last_validated_step == int(state.step) == run.progress.best_step)

  # --- the end --------------------------------------------------------------------------

  def report_choices(self, states, splits: list[str], last_ppl: dict[int, float],
                     step: int) -> list:
    """Which parameters each run reports: its last where they are the best on validation
    (`last_ppl`: the runs whose last update, `step`, no recorded validation scored) or where
    --patience=0 keeps the last, else its best; a diverged run's are whatever it holds (not
    reported). Returns each run's last parameters, or None where its best are to be restored
    (final_params). Each run's choice is kept as `reported`, also in its newest checkpoint
    (ModelRun.keep_report); `splits`: those the final evaluation scores (logged)."""
    choices = []
    for k, run in enumerate(self.all):
      progress, last = run.progress, self.member(states, k)
      take_last = (run.diverged or progress.best_valid_ppl is None
                   or run.config.patience == 0
                   or (k in last_ppl and last_ppl[k] < progress.best_valid_ppl))
      validated = progress.best_valid_ppl if run.last_validated_step == step else None
      run.reported = ({'parameters': 'last', 'step': int(last.step),
                       'valid_ppl': last_ppl.get(k, validated)} if take_last else
                      {'parameters': 'best', 'step': progress.best_step,
                       'valid_ppl': progress.best_valid_ppl})
      choices.append(last.params if take_last else None)
      run.keep_report(last)
      if self.count == 1 and not run.diverged and splits:
        log.info('final evaluation: %s with the %s parameters (step %d%s)', ', '.join(splits),
                 run.reported['parameters'], run.reported['step'],
                 '' if run.reported['valid_ppl'] is None
                 else f', validation perplexity {run.reported["valid_ppl"]:.2f}')
    return choices

  def final_params(self, choices: list) -> list:
    """Each run's parameters to report (report_choices's), its best restored where it
    reports them: from best/, or the same step's copy in checkpoints/ where best/ is damaged
    or gone. Called once the training states are released, so that a best's state is never
    held beside them: memory.require_fit counts one state."""
    return [params if params is not None else self._best_params(run)
            for run, params in zip(self.all, choices)]

  def _best_params(self, run: ModelRun):
    best = run.checkpoints.restore_best(self.template, run.progress.best_step)
    if best is None:
      raise CheckpointError(f'{run.workdir}/best holds no checkpoint, though step '
                            f'{run.progress.best_step} was the best: its parameters are '
                            'lost; train again in a new --workdir.')
    return best[0].params

  def summary(self, k: int, status: RunStatus, nll: dict, params, mesh, step: int,
              phases: dict) -> dict:
    """Run k's summary from its Σ -log p per evaluated split (also its summary.json, metrics
    and learning curve), with this invocation's `phases` (seconds); a run whose final
    perplexity exploded diverges: its error, no file."""
    run, splits = self.all[k], self.corpus.splits
    results = {name: perplexity(nll[name], len(splits[name])) for name in nll}
    exploded_splits = [name for name in nll
                       if exploded(nll[name] / len(splits[name]), self.corpus.vocab.size)]
    if exploded_splits and not run.diverged:
      name = exploded_splits[0]
      run.diverge(f'the final {name} perplexity is {results[name]["ppl"]}')
    if run.diverged:
      return diverged_summary(run)
    steps = run.saved_step if run.saved_step is not None else step
    summary = run_summary(run.status(status), run.config, self.corpus, mesh, run.progress,
                          steps, params, results, run.wall_seconds(),
                          periodic_validation=self.validation, phase_seconds=phases,
                          spelling_nll=self.spelling_nll)
    summary['reported'] = run.reported
    if self.count > 1:
      summary['trained_together'] = self.count
    if self.main:
      write_summary(run.workdir, summary)
      run.writer.final(summary)
      plots.learning_curve(run.workdir)
    return summary

  def unfinished_summaries(self, status: RunStatus, step: int) -> list[dict]:
    """Each run's summary when the loop stopped before its final evaluation."""
    return [diverged_summary(run) if run.diverged else
            {'status': status, 'steps': step, 'workdir': str(run.workdir)}
            for run in self.all]


def diverged_summary(run: ModelRun) -> dict:
  return {'status': RunStatus.DIVERGED, 'error': run.diverged, 'workdir': str(run.workdir)}
