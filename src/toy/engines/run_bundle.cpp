// engines/run_bundle.cpp — run ids, atomic files, checkpoint discovery, reading a run's events and the
// SVG loss plot.
#include "toy/engines/run_bundle.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "toy/engines/train_data.h"
#include "toy/io/output_file.h"

namespace toy {

namespace fs = std::filesystem;

std::string new_run_id(std::string_view recipe) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return std::string(buf) + "-" + std::string(recipe);
}

void write_file_atomic(const std::string& path, std::string_view text) { write_output_file(path, text); }

BundleLock::BundleLock(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    if (e == EWOULDBLOCK)
      throw DataError(run_dir + " is in use: another toy process is training this run (it holds " + path + ")");
    throw std::runtime_error(path + ": cannot lock: " + std::strerror(e));
  }
}

BundleLock::~BundleLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

BundleLock& BundleLock::operator=(BundleLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

namespace {
// "step-12.gguf" or "step-12.optim.gguf".
bool is_checkpoint_name(std::string_view name) {
  if (name.substr(0, 5) != "step-") return false;
  name.remove_prefix(5);
  const size_t digits = name.find_first_not_of("0123456789");
  if (digits == 0 || digits == std::string_view::npos) return false;
  name.remove_prefix(digits);
  return name == ".gguf" || name == ".optim.gguf";
}
}  // namespace

bool is_bundle_temporary(std::string_view name, bool in_weights) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string_view::npos) return false;
  const std::string_view file = name.substr(0, at), suffix = name.substr(at + 5);
  const bool ours = in_weights ? is_checkpoint_name(file) : (file == "config.json" || file == "loss.svg");
  if (!ours || suffix.empty() || suffix[0] < '0' || suffix[0] > '9') return false;
  for (char ch : suffix)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-' && ch != '_') return false;
  return true;
}

void remove_bundle_temporaries(const std::string& run_dir) {
  for (const char* sub : {"", kWeightsDir, kAdaptersDir}) {
    const bool in_checkpoints = *sub != 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(run_dir) / sub, ec))
      if (e.is_regular_file(ec) && is_bundle_temporary(e.path().filename().string(), in_checkpoints))
        fs::remove(e.path(), ec);
  }
}

std::string checkpoint_model_path(const std::string& run_dir, int64_t step, const char* dir) {
  return (fs::path(run_dir) / dir / ("step-" + std::to_string(step) + ".gguf")).string();
}

std::string checkpoint_optimizer_path(const std::string& run_dir, int64_t step, const char* dir) {
  return (fs::path(run_dir) / dir / ("step-" + std::to_string(step) + ".optim.gguf")).string();
}

std::optional<Checkpoint> latest_resumable_checkpoint(const std::string& run_dir, const char* sub) {
  std::optional<Checkpoint> best;
  const fs::path dir = fs::path(run_dir) / sub;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    long long step = -1;
    int used = 0;
    if (std::sscanf(name.c_str(), "step-%lld.gguf%n", &step, &used) != 1 || size_t(used) != name.size() || step < 0)
      continue;
    Checkpoint c{step, checkpoint_model_path(run_dir, step, sub), checkpoint_optimizer_path(run_dir, step, sub)};
    if (fs::exists(c.optimizer) && (!best || step > best->step)) best = c;
  }
  return best;
}

void link_final(const std::string& run_dir, const std::string& model, const char* dir) {
  const fs::path fin = fs::path(run_dir) / dir / "final.gguf";
  std::error_code ec;
  fs::remove(fin, ec);
  fs::create_hard_link(model, fin, ec);
  if (ec) fs::copy_file(model, fin, fs::copy_options::overwrite_existing);
}

// ------------------------------------------------------------------------------------------
// The loss plot.

namespace {

struct Axis {
  double lo, hi, tick;  // data range and tick spacing
};

// Tick spacing of 1, 2 or 5 × 10^k giving about `n` intervals over [lo, hi].
Axis nice_axis(double lo, double hi, int n) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / n, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  const double tick = (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
  return {lo, hi, tick};
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string label(double v, double tick) {
  char b[32];
  if (std::abs(v) >= 1e5)
    std::snprintf(b, sizeof b, "%.3g", v);
  else {
    const int digits = tick >= 1 ? 0 : int(std::ceil(-std::log10(tick) - 1e-9));
    std::snprintf(b, sizeof b, "%.*f", digits, v);
  }
  return b;
}

std::string xml_escape(std::string_view s) {
  std::string r;
  for (char c : s)
    r += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&quot;" : std::string(1, c);
  return r;
}

// At most `max_points` points: consecutive buckets averaged.
std::vector<CurvePoint> downsample(std::span<const CurvePoint> p, size_t max_points) {
  if (p.size() <= max_points) return {p.begin(), p.end()};
  std::vector<CurvePoint> r;
  const double per = double(p.size()) / double(max_points);
  for (size_t b = 0; b < max_points; ++b) {
    const size_t i0 = size_t(double(b) * per), i1 = std::max(i0 + 1, size_t(double(b + 1) * per));
    CurvePoint c;
    for (size_t i = i0; i < i1; ++i) c.step += p[i].step, c.loss += p[i].loss;
    r.push_back({c.step / double(i1 - i0), c.loss / double(i1 - i0)});
  }
  return r;
}

// Centred moving average over up to 2·half + 1 points (fewer at the ends, so no lag).
std::vector<CurvePoint> smooth(std::span<const CurvePoint> p, size_t half) {
  std::vector<double> prefix(p.size() + 1, 0.0);
  for (size_t i = 0; i < p.size(); ++i) prefix[i + 1] = prefix[i] + p[i].loss;
  std::vector<CurvePoint> r;
  for (size_t i = 0; i < p.size(); ++i) {
    const size_t h = std::min({half, i, p.size() - 1 - i});
    r.push_back({p[i].step, (prefix[i + h + 1] - prefix[i - h]) / double(2 * h + 1)});
  }
  return r;
}

}  // namespace

std::string loss_svg(std::span<const CurvePoint> train, std::span<const CurvePoint> eval, std::string_view title,
                     const CurveLabels& labels) {
  const LossCurves run{.name = "", .train = {train.begin(), train.end()}, .eval = {eval.begin(), eval.end()}};
  return loss_svg(std::span<const LossCurves>(&run, 1), title, labels);
}

std::string loss_svg(std::span<const LossCurves> runs_in, std::string_view title, const CurveLabels& labels) {
  auto finite = [](std::span<const CurvePoint> in) {
    std::vector<CurvePoint> r;
    for (const CurvePoint& c : in)
      if (std::isfinite(c.loss) && std::isfinite(c.step)) r.push_back(c);
    return r;
  };
  std::vector<LossCurves> runs;
  for (const LossCurves& r : runs_in) runs.push_back({r.name, finite(r.train), finite(r.eval)});
  constexpr double W = 800, H = 480, L = 72, R = 24, T = 44, B = 56;  // canvas and margins
  constexpr double px0 = L, px1 = W - R, py0 = T, py1 = H - B;        // plot area

  double xmax = 1, ylo = INFINITY, yhi = -INFINITY;
  for (const LossCurves& r : runs)
    for (const auto* s : {&r.train, &r.eval})
      for (const CurvePoint& c : *s)
        xmax = std::max(xmax, c.step), ylo = std::min(ylo, c.loss), yhi = std::max(yhi, c.loss);
  if (!std::isfinite(ylo)) ylo = 0, yhi = 1;
  const double pad = std::max(0.05 * (yhi - ylo), 1e-3);
  Axis ax = nice_axis(0, xmax, 8), ay = nice_axis(ylo - pad, yhi + pad, 6);
  ay.lo = std::floor(ay.lo / ay.tick) * ay.tick;
  ay.hi = std::ceil(ay.hi / ay.tick) * ay.tick;
  auto X = [&](double s) { return px0 + (s - ax.lo) / (ax.hi - ax.lo) * (px1 - px0); };
  auto Y = [&](double l) { return py1 - (l - ay.lo) / (ay.hi - ay.lo) * (py1 - py0); };

  std::string s;
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"480\" viewBox=\"0 0 800 480\" "
       "font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"800\" height=\"480\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(W / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" + xml_escape(title) +
       "</text>\n";
  // Grid, ticks and tick labels.
  for (double v = std::ceil(ax.lo / ax.tick) * ax.tick; v <= ax.hi + 1e-9 * ax.tick; v += ax.tick) {
    s += "<line x1=\"" + num(X(v)) + "\" y1=\"" + num(py0) + "\" x2=\"" + num(X(v)) + "\" y2=\"" + num(py1 + 5) +
         "\" stroke=\"#e5e5e5\"/>\n";
    s += "<text x=\"" + num(X(v)) + "\" y=\"" + num(py1 + 20) + "\" text-anchor=\"middle\">" + label(v, ax.tick) +
         "</text>\n";
  }
  for (double v = ay.lo; v <= ay.hi + 1e-9 * ay.tick; v += ay.tick) {
    s += "<line x1=\"" + num(px0 - 5) + "\" y1=\"" + num(Y(v)) + "\" x2=\"" + num(px1) + "\" y2=\"" + num(Y(v)) +
         "\" stroke=\"#e5e5e5\"/>\n";
    s += "<text x=\"" + num(px0 - 9) + "\" y=\"" + num(Y(v) + 4) + "\" text-anchor=\"end\">" + label(v, ay.tick) +
         "</text>\n";
  }
  // Axes and their labels.
  s += "<line x1=\"" + num(px0) + "\" y1=\"" + num(py1) + "\" x2=\"" + num(px1) + "\" y2=\"" + num(py1) +
       "\" stroke=\"black\"/>\n";
  s += "<line x1=\"" + num(px0) + "\" y1=\"" + num(py0) + "\" x2=\"" + num(px0) + "\" y2=\"" + num(py1) +
       "\" stroke=\"black\"/>\n";
  s += "<text x=\"" + num((px0 + px1) / 2) + "\" y=\"" + num(H - 14) + "\" text-anchor=\"middle\">step</text>\n";
  s += "<text x=\"18\" y=\"" + num((py0 + py1) / 2) + "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " +
       num((py0 + py1) / 2) + ")\">" + xml_escape(labels.y_axis) + "</text>\n";

  auto polyline = [&](const std::vector<CurvePoint>& p, const char* color, double width, const char* dash = nullptr) {
    if (p.empty()) return;
    s += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"" + num(width) + "\"" +
         (dash ? " stroke-dasharray=\"" + std::string(dash) + "\"" : std::string()) + " points=\"";
    for (const CurvePoint& c : p) s += num(X(c.step)) + "," + num(Y(c.loss)) + " ";
    s += "\"/>\n";
  };
  // Per run: the raw training loss (light), its moving average (dark), the eval loss (markers).
  struct Colors {
    const char *raw, *mean, *eval;
  };
  constexpr Colors kColors[] = {{"#a6cbe6", "#1f5fa8", "#d62728"}, {"#f7c59f", "#d9730d", "#6a3d9a"}};
  struct LegendEntry {
    const char* color;
    std::string text;
  };
  std::vector<LegendEntry> legend;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Colors& c = kColors[i % std::size(kColors)];
    const std::vector<CurvePoint> raw = downsample(runs[i].train, 1600);
    polyline(raw, c.raw, 1);
    if (raw.size() >= 20) polyline(smooth(raw, std::clamp<size_t>(raw.size() / 80, 1, 50)), c.mean, 2);
    polyline(runs[i].eval, c.eval, 2, runs.size() > 1 ? "6 3" : nullptr);
    for (const CurvePoint& p : runs[i].eval)
      s += "<circle cx=\"" + num(X(p.step)) + "\" cy=\"" + num(Y(p.loss)) + "\" r=\"3\" fill=\"" + c.eval + "\"/>\n";
    const std::string name = runs[i].name.size() > 28 ? runs[i].name.substr(0, 27) + "…" : runs[i].name;
    const std::string prefix = name.empty() ? "" : name + ": ";
    legend.push_back(
        {c.mean, prefix + std::string(labels.train) + " (" + std::to_string(runs[i].train.size()) + " steps)"});
    if (!runs[i].eval.empty()) legend.push_back({c.eval, prefix + std::string(labels.eval)});
  }

  // Legend (top right).
  const double lw = runs.size() > 1 ? 330 : 180, lx = px1 - lw - 10, ly = py0 + 10;
  s += "<rect x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" width=\"" + num(lw) + "\" height=\"" +
       num(10 + 18 * double(legend.size())) + "\" fill=\"white\" stroke=\"#bbbbbb\"/>\n";
  for (size_t i = 0; i < legend.size(); ++i) {
    const double y = ly + 14 + 18 * double(i);
    s += "<line x1=\"" + num(lx + 8) + "\" y1=\"" + num(y) + "\" x2=\"" + num(lx + 30) + "\" y2=\"" + num(y) +
         "\" stroke=\"" + legend[i].color + "\" stroke-width=\"2\"/>\n";
    s += "<text x=\"" + num(lx + 36) + "\" y=\"" + num(y + 4) + "\">" + xml_escape(legend[i].text) + "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

std::string confusion_svg(std::span<const int64_t> confusion, const std::vector<std::string>& class_names,
                          std::string_view title) {
  const size_t K = size_t(std::lround(std::sqrt(double(confusion.size()))));
  if (K * K != confusion.size()) throw std::invalid_argument("confusion_svg: not a square matrix");
  constexpr double cell = 44, L = 120, T = 90;  // cell side, room for row names and column names
  const double W = L + double(K) * cell + 80, H = T + double(K) * cell + 20;
  auto name = [&](size_t k) { return xml_escape(k < class_names.size() ? class_names[k] : std::to_string(k)); };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) + "\" height=\"" + num(H) +
                  "\" viewBox=\"0 0 " + num(W) + " " + num(H) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  s += "<rect width=\"" + num(W) + "\" height=\"" + num(H) + "\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(W / 2) + "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" + xml_escape(title) +
       " (rows: true class, columns: predicted)</text>\n";
  for (size_t k = 0; k < K; ++k) {  // column names, slanted; row names
    const double cx = L + (double(k) + 0.5) * cell, cy = T + (double(k) + 0.5) * cell;
    s += "<text x=\"" + num(cx) + "\" y=\"" + num(T - 6) + "\" transform=\"rotate(-40 " + num(cx) + " " + num(T - 6) +
         ")\">" + name(k) + "</text>\n";
    s += "<text x=\"" + num(L - 6) + "\" y=\"" + num(cy + 4) + "\" text-anchor=\"end\">" + name(k) + "</text>\n";
  }
  for (size_t t = 0; t < K; ++t) {
    int64_t row = 0;
    for (size_t p = 0; p < K; ++p) row += confusion[t * K + p];
    for (size_t p = 0; p < K; ++p) {
      const int64_t n = confusion[t * K + p];
      const double share = row ? double(n) / double(row) : 0, x = L + double(p) * cell, y = T + double(t) * cell;
      const int shade = int(std::lround(255 * (1 - share)));  // white (none) to dark blue (the whole row)
      char fill[16];
      std::snprintf(fill, sizeof fill, "#%02x%02xff", shade, shade);
      s += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(cell) + "\" height=\"" + num(cell) +
           "\" fill=\"" + fill + "\" stroke=\"#dddddd\"/>\n";
      s += "<text x=\"" + num(x + cell / 2) + "\" y=\"" + num(y + cell / 2 + 4) + "\" text-anchor=\"middle\" fill=\"" +
           (share > 0.5 ? "white" : "black") + "\">" + std::to_string(n) + "</text>\n";
    }
    char acc[32];
    std::snprintf(acc, sizeof acc, "%.1f%%", row ? 100.0 * double(confusion[t * K + t]) / double(row) : 0.0);
    s += "<text x=\"" + num(L + double(K) * cell + 8) + "\" y=\"" + num(T + (double(t) + 0.5) * cell + 4) + "\">" +
         acc + "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

RunLog read_run_log(const std::string& run_dir) {
  if (!fs::is_directory(run_dir)) throw DataError(run_dir + ": no such directory");
  const fs::path events = fs::path(run_dir) / "events.jsonl";
  if (!fs::is_regular_file(events))
    throw DataError(run_dir + ": not a run bundle (no events.jsonl; toy train writes one in runs/<id>/)");
  RunLog log;
  std::map<int64_t, double> train, eval, seconds;
  std::map<int64_t, int64_t> tokens;
  std::istringstream in(read_file(events.string()));
  for (std::string line; std::getline(in, line);) {
    const auto e = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!e.is_object() || !e.contains("kind") || !e["kind"].is_string()) continue;
    const std::string kind = e["kind"];
    const bool has_step = e.contains("step") && e["step"].is_number_integer();
    const bool has_loss = e.contains("loss") && e["loss"].is_number();
    if (kind == "run_start") {
      if (log.run_id.empty() && e.contains("run_id") && e["run_id"].is_string()) log.run_id = e["run_id"];
      const auto& m = e.contains("model") && e["model"].is_object() ? e["model"] : nlohmann::json::object();
      if (m.contains("arch") && m["arch"].is_string() && e.contains("parameters") && e["parameters"].is_number())
        log.model =
            m["arch"].get<std::string>() + ", " + std::to_string(e["parameters"].get<int64_t>()) + " parameters";
      log.end_reason.clear();
    } else if (kind == "step" && has_step && has_loss) {
      const int64_t s = e["step"];
      train[s] = e["loss"];
      if (e.contains("wall_us") && e["wall_us"].is_number()) seconds[s] = e["wall_us"].get<double>() * 1e-6;
      if (e.contains("tokens") && e["tokens"].is_number_integer()) tokens[s] = e["tokens"];
    } else if (kind == "eval" && has_step && has_loss) {
      eval[e["step"].get<int64_t>()] = e["loss"];
    } else if (kind == "run_end" && e.contains("reason") && e["reason"].is_string()) {
      log.end_reason = e["reason"];
    }
  }
  if (log.run_id.empty()) {
    fs::path dir = fs::path(run_dir).lexically_normal();
    if (dir.filename().empty()) dir = dir.parent_path();  // "runs/a/"
    log.run_id = dir.filename().string();
  }
  for (auto [s, l] : train) log.train.push_back({double(s), l});
  for (auto [s, l] : eval) log.eval.push_back({double(s), l});
  for (auto [s, t] : seconds) log.train_seconds += t;
  if (!tokens.empty()) log.tokens = tokens.rbegin()->second;
  return log;
}

}  // namespace toy
