// examples/runs_compare.cpp — two training runs compared from what they left on disk.
//
// What it teaches: a run bundle (runs/<id>/) is the record of a run: config.json says how it was
// made, events.jsonl what happened at each step (docs/events.md). Nothing else is needed to compare
// runs afterwards: read both logs, put the loss curves on one chart, line the numbers up. Here two
// tiny runs that differ only in their learning rate are trained first (a second each, on the
// built-in corpus); give two bundles of your own instead to compare those. `toy runs compare A B`
// is the same as a command.
//
//   build/examples/example_runs_compare [RUN_A RUN_B]     default: trains runs/lr-1e-3 and runs/lr-1e-2
//
// Prints the held-out losses side by side, a summary of each run, and writes compare.svg.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "toy/engines/run_bundle.h"
#include "toy/recipes/from_scratch.h"

using namespace toy;

// A tiny from-scratch run (the recipe `toy train from-scratch` runs) into <runs_dir>/<id>.
std::string train_tiny_run(const std::string& runs_dir, const std::string& id, float lr) {
  recipes::TrainRunConfig c;  // the defaults: the built-in corpus, byte-level tokens, a llama
  c.d_model = 32, c.n_layer = 1, c.n_head = 2, c.context = 32, c.batch = 4;
  c.steps = 60, c.eval_every = 10, c.eval_batches = 2, c.warmup = 0;
  c.lr = lr;
  c.runs_dir = runs_dir, c.run_id = id;
  std::FILE* quiet = std::fopen("/dev/null", "w");  // the step lines: the log has them all
  const recipes::RunResult r = recipes::train_run(c, {.out = quiet, .err = quiet, .progress = false, .stop = nullptr});
  std::fclose(quiet);
  return r.run_dir;
}

int main(int argc, char** argv) {
  try {
    // 1. Two bundles: given, or trained now (a fresh directory each time).
    std::string dir_a, dir_b;
    if (argc > 2) {
      dir_a = argv[1], dir_b = argv[2];
    } else {
      const auto runs = std::filesystem::temp_directory_path() / "toy_runs_compare_example";
      std::filesystem::remove_all(runs);
      dir_a = train_tiny_run(runs.string(), "lr-1e-3", 1e-3f);
      dir_b = train_tiny_run(runs.string(), "lr-1e-2", 1e-2f);
    }

    // 2. Each bundle's events.jsonl, read back: the training loss of every step, the held-out loss
    //    of every evaluation, the tokens and the time.
    const RunLog a = read_run_log(dir_a), b = read_run_log(dir_b);
    std::printf("%s: %s\n%s: %s\n\n", a.run_id.c_str(), a.model.c_str(), b.run_id.c_str(), b.model.c_str());

    // 3. The held-out losses side by side, at the steps both runs evaluated.
    std::printf("step  %12s  %12s   (held-out loss, nats/token)\n", a.run_id.c_str(), b.run_id.c_str());
    for (const CurvePoint& pa : a.eval)
      for (const CurvePoint& pb : b.eval)
        if (pa.step == pb.step) std::printf("%4.0f  %12.4f  %12.4f\n", pa.step, pa.loss, pb.loss);

    // 4. One number per run: where each ended, how fast it went.
    for (const RunLog* r : {&a, &b}) {
      const double tokens_per_s = r->train_seconds > 0 ? double(r->tokens) / r->train_seconds : 0;
      std::printf("%s: %zu steps, final training loss %.4f, final held-out loss %.4f, %.0f tokens/s, %s\n",
                  r->run_id.c_str(), r->train.size(), r->train.empty() ? NAN : r->train.back().loss,
                  r->eval.empty() ? NAN : r->eval.back().loss, tokens_per_s, r->end_reason.c_str());
    }

    // 5. Both curves on one chart: each run in its own colours, held-out losses dashed.
    const std::vector<LossCurves> curves = {{.name = a.run_id, .train = a.train, .eval = a.eval},
                                            {.name = b.run_id, .train = b.train, .eval = b.eval}};
    write_file_atomic("compare.svg", loss_svg(curves, a.run_id + " vs " + b.run_id));
    std::printf("wrote compare.svg\n");

    // The comparison must have something in it: two curves whose held-out loss fell.
    auto fell = [](const RunLog& r) { return r.eval.size() >= 2 && r.eval.back().loss < r.eval.front().loss; };
    return fell(a) && fell(b) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
