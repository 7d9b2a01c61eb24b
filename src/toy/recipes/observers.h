// recipes/observers.h — L5: what a training run reports and saves, each an Observer of the
// Trainer (trainer.h). add_standard_observers() adds them all, in this order:
//   Console     stdout `step N: loss=X` (every --log-every) / `eval N: val_loss=X`, the progress bar
//               and summaries on stderr
//   EventFile   events.jsonl (engines/events.h, docs/events.md)
//   LossPlot    loss.svg, redrawn after each evaluation and checkpoint and at the end
//   Evaluator   the held-out loss at every multiple of eval_every and at `steps`
//   Checkpointer  weights/step-N.gguf + .optim.gguf at every multiple of checkpoint_every and at the end
// A recipe may add its own (e.g. a different checkpoint format) instead of or beside these.
#pragma once

#include <memory>

#include "toy/recipes/trainer.h"

namespace toy::recipes {

std::unique_ptr<Observer> console_observer();
std::unique_ptr<Observer> event_file_observer();
std::unique_ptr<Observer> loss_plot_observer();
std::unique_ptr<Observer> evaluator();
std::unique_ptr<Observer> checkpointer();

void add_standard_observers(Trainer& t);

}  // namespace toy::recipes
