// cli/cmd_runs.cpp — `toy runs compare A B`: two run bundles side by side, the seeds' run-log
// compare: both loss curves on one chart (SVG) and a text summary of each run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/common.h"
#include "toy/engines/run_bundle.h"
#include "toy/engines/train_data.h"

namespace toy::cli {
namespace {

// The point of lowest loss (NaN loss when there is none).
CurvePoint best(const std::vector<CurvePoint>& p) {
  if (p.empty()) return {NAN, NAN};
  return *std::min_element(p.begin(), p.end(),
                           [](const CurvePoint& a, const CurvePoint& b) { return a.loss < b.loss; });
}

std::string loss_at(const CurvePoint& c) {
  if (!std::isfinite(c.loss)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.4f (step %.0f)", c.loss, c.step);
  return b;
}

// One row of the summary: a name, then each run's value.
struct Row {
  std::string name;
  std::vector<std::string> values;
};

std::string summary(const std::vector<RunLog>& runs) {
  auto last = [](const std::vector<CurvePoint>& p) { return p.empty() ? CurvePoint{NAN, NAN} : p.back(); };
  std::vector<Row> rows = {
      {"run", {}},        {"model", {}},     {"steps", {}},           {"tokens", {}},         {"tokens/s", {}},
      {"final loss", {}}, {"best loss", {}}, {"final eval loss", {}}, {"best eval loss", {}}, {"ended", {}}};
  for (const RunLog& r : runs) {
    char tps[32] = "-";
    if (r.train_seconds > 0) std::snprintf(tps, sizeof tps, "%.0f", double(r.tokens) / r.train_seconds);
    const std::vector<std::string> v = {for_terminal(r.run_id),
                                        r.model.empty() ? "-" : for_terminal(r.model),
                                        r.train.empty() ? "0" : std::to_string(int64_t(r.train.back().step)),
                                        std::to_string(r.tokens),
                                        tps,
                                        loss_at(last(r.train)),
                                        loss_at(best(r.train)),
                                        loss_at(last(r.eval)),
                                        loss_at(best(r.eval)),
                                        r.end_reason.empty() ? "(no run_end: running or killed)" : r.end_reason};
    for (size_t i = 0; i < rows.size(); ++i) rows[i].values.push_back(v[i]);
  }
  size_t w0 = 0, w1 = 0;
  for (const Row& row : rows) w0 = std::max(w0, row.name.size()), w1 = std::max(w1, row.values[0].size());
  std::string out;
  for (const Row& row : rows) {
    std::string line = row.name + std::string(w0 + 2 - row.name.size(), ' ') + row.values[0];
    line += std::string(w1 + 2 - row.values[0].size(), ' ') + row.values[1];
    out += line + "\n";
  }
  return out;
}

int run(const Args& a) {
  const std::string sub = *a.positional(0);
  if (sub != "compare") throw UsageError("unknown subcommand '" + for_terminal(sub) + "' (toy runs compare A B)");
  std::vector<RunLog> runs;
  try {
    for (size_t i = 1; i <= 2; ++i) runs.push_back(read_run_log(*a.positional(i)));
  } catch (const DataError& e) {
    throw InputError(e.what());
  }
  std::vector<LossCurves> curves;
  for (const RunLog& r : runs) curves.push_back({.name = r.run_id, .train = r.train, .eval = r.eval});
  const std::string svg_path = a.str("output");
  write_file_atomic(svg_path, loss_svg(curves, runs[0].run_id + " vs " + runs[1].run_id));
  std::fputs(summary(runs).c_str(), stdout);
  std::fprintf(stderr, "runs: wrote %s\n", svg_path.c_str());
  return kOk;
}

Registrar reg({
    .name = "runs",
    .summary = "compare two training runs: their loss curves on one chart (SVG) and a summary side by side",
    .positionals = {{"SUBCOMMAND", "compare"},
                    {"A", "a run bundle directory (runs/<id>)"},
                    {"B", "the run bundle to compare it with"}},
    .flags = {{"output", FlagType::Path, "compare.svg", "where to write the chart", 'o'}},
    .run = run,
    .details =
        "Reads each bundle's events.jsonl (docs/events.md). The summary on stdout gives per run: steps,\n"
        "training tokens, tokens/s (training steps only), the final and best training and held-out losses\n"
        "with their steps, and how the run ended. A directory without events.jsonl is an input error (exit 3).\n\n"
        "example: toy runs compare runs/baseline runs/lr3e-3 -o lr.svg",
});

}  // namespace
}  // namespace toy::cli
