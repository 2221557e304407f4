// The report pages: HTML with inline CSS and SVG charts (no scripts, fonts or network), and
// the same sections as Markdown tables.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "framework/report/report.h"

namespace qflow::report {

namespace {

std::string fixed(double value, int decimals) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

// Why a sensitivity stage with a `when-below` bound ranked no node.
std::string unranked_note(const Sensitivity& sv) {
  return "Nodes not ranked: the PTQ model's output cosine on " + std::to_string(sv.samples) + " samples, " +
         (sv.ptq_cosine ? fixed(*sv.ptq_cosine, 6) : std::string("?")) + ", is not below " + fixed(sv.when_below, 6) +
         " (option when-below), so no precision change needs a ranking.";
}

std::string general(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

std::string bytes_text(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  if (bytes < 1024 * 1024) return fixed(static_cast<double>(bytes) / 1024.0, 1) + " KiB";
  return fixed(static_cast<double>(bytes) / (1024.0 * 1024.0), 2) + " MiB";
}

std::string seconds_text(double seconds) { return fixed(seconds * 1e3, 1) + " ms"; }

// Names are cut in the charts (the full name is in the SVG <title> and the tables).
std::string shorten(const std::string& text, std::size_t keep) {
  if (text.size() <= keep) return text;
  return "\xE2\x80\xA6" + text.substr(text.size() - (keep - 1));
}

std::string md_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|' || c == '\\' || c == '`' || c == '*' || c == '_' || c == '<' || c == '>' || c == '[' || c == ']')
      out += '\\';
    if (c == '\n') {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out;
}

double total_seconds(const ReportInput& input) {
  double total = 0.0;
  for (const StageRow& stage : input.stages) total += stage.seconds;
  return total;
}

const char* kStyle = R"css(
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0;padding:24px 32px;color:#1f2328;background:#fff;font-size:14px;line-height:1.4}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;padding-bottom:4px;border-bottom:1px solid #d0d7de}
h3{font-size:15px;margin:16px 0 6px}nav{margin:8px 0 16px}nav a{margin-right:14px;color:#0969da;text-decoration:none}
table{border-collapse:collapse;margin:6px 0 10px}th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 14px;min-width:150px}
.card b{display:block;font-size:20px}.card span{color:#59636e;font-size:12px}
.ok{color:#1a7f37}.bad{color:#cf222e}.note{color:#59636e}
.grid{display:flex;flex-wrap:wrap;gap:10px}figure{margin:0;border:1px solid #d0d7de;border-radius:6px;padding:6px}
figcaption{font-size:11px;max-width:300px;overflow-wrap:anywhere}svg text{font-family:ui-monospace,Menlo,Consolas,monospace}
.bar{display:inline-block;height:9px;background:#54aeff;vertical-align:middle}
details summary{cursor:pointer;color:#0969da}
)css";

// ---------------------------------------------------------------------------------------
// SVG charts

// Per-layer error, worst first: a bar of (1 - cosine) scaled to the worst layer.
std::string cosine_chart(const LayerComparison& comparison, std::size_t cap) {
  const std::size_t rows = std::min(cap, comparison.rows.size());
  if (rows == 0) return "";
  double worst = 0.0;
  for (std::size_t i = 0; i < rows; ++i) worst = std::max(worst, 1.0 - comparison.rows[i].accumulated.cosine);
  if (!(worst > 0.0)) worst = 1.0;
  const int row_height = 16, label_width = 360, bar_width = 440, value_width = 110;
  const int width = label_width + bar_width + value_width, height = static_cast<int>(rows) * row_height + 24;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
                    std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
                    "\" role=\"img\" aria-label=\"per-layer cosine, worst first\">";
  svg += "<text x=\"" + std::to_string(label_width) + "\" y=\"12\" font-size=\"11\" fill=\"#59636e\">1 - cosine (bar, scaled to the worst layer); cosine on the right</text>";
  for (std::size_t i = 0; i < rows; ++i) {
    const LayerRow& row = comparison.rows[i];
    const double error = std::max(0.0, 1.0 - row.accumulated.cosine);
    const double length = std::isfinite(error) ? std::min(1.0, error / worst) * bar_width : bar_width;
    const int y = 20 + static_cast<int>(i) * row_height;
    const std::string color = row.accumulated.cosine < 0.99 ? "#cf222e" : (row.accumulated.cosine < 0.999 ? "#d4a72c" : "#54aeff");
    svg += "<g><title>" + html_escape(row.tensor) + " (" + html_escape(row.op_type) + "): cosine " +
           fixed(row.accumulated.cosine, 6) + "</title>";
    svg += "<text x=\"" + std::to_string(label_width - 6) + "\" y=\"" + std::to_string(y + 11) +
           "\" font-size=\"11\" text-anchor=\"end\">" + html_escape(shorten(row.tensor, 48)) + "</text>";
    svg += "<rect x=\"" + std::to_string(label_width) + "\" y=\"" + std::to_string(y + 2) + "\" width=\"" +
           fixed(std::max(length, 1.0), 1) + "\" height=\"" + std::to_string(row_height - 4) + "\" fill=\"" + color + "\"/>";
    svg += "<text x=\"" + std::to_string(label_width + bar_width + 6) + "\" y=\"" + std::to_string(y + 11) +
           "\" font-size=\"11\">" + fixed(row.accumulated.cosine, 6) + "</text></g>";
  }
  svg += "</svg>";
  return svg;
}

// One tensor's |x| histogram (log counts), bins merged to at most 64 bars, with a vertical
// line per threshold.
std::string histogram_chart(const Histogram& histogram) {
  const int width = 300, height = 130, left = 4, right = 4, top = 6, bottom = 18;
  const int plot_w = width - left - right, plot_h = height - top - bottom;
  const std::size_t bins = histogram.counts.size();
  const std::size_t bars = std::min<std::size_t>(64, bins);
  std::vector<double> merged(bars, 0.0);
  for (std::size_t k = 0; k < bins; ++k) merged[k * bars / bins] += histogram.counts[k];
  double peak = 0.0;
  for (double c : merged) peak = std::max(peak, std::log10(1.0 + c));
  if (!(peak > 0.0)) peak = 1.0;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
                    std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
                    "\" role=\"img\" aria-label=\"histogram of |x|\">";
  svg += "<rect x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(top) + "\" width=\"" + std::to_string(plot_w) +
         "\" height=\"" + std::to_string(plot_h) + "\" fill=\"#f6f8fa\"/>";
  const double bar_w = static_cast<double>(plot_w) / static_cast<double>(std::max<std::size_t>(bars, 1));
  for (std::size_t k = 0; k < bars; ++k) {
    const double h = std::log10(1.0 + merged[k]) / peak * plot_h;
    if (h <= 0.0) continue;
    svg += "<rect x=\"" + fixed(left + bar_w * static_cast<double>(k), 2) + "\" y=\"" + fixed(top + plot_h - h, 2) +
           "\" width=\"" + fixed(std::max(bar_w - 0.5, 0.5), 2) + "\" height=\"" + fixed(h, 2) + "\" fill=\"#8c959f\"/>";
  }
  const double range = histogram.range > 0.0 ? histogram.range : 1.0;
  for (const Threshold& t : histogram.thresholds) {
    const double x = left + std::clamp(t.value / range, 0.0, 1.0) * plot_w;
    const std::string color = t.chosen ? "#cf222e" : "#0969da";
    svg += "<line x1=\"" + fixed(x, 2) + "\" y1=\"" + std::to_string(top) + "\" x2=\"" + fixed(x, 2) + "\" y2=\"" +
           std::to_string(top + plot_h) + "\" stroke=\"" + color + "\" stroke-width=\"" + (t.chosen ? "2" : "1") + "\"" +
           (t.chosen ? "" : " stroke-dasharray=\"3,2\"") + "><title>" + html_escape(t.label) + " " + general(t.value) +
           "</title></line>";
  }
  svg += "<text x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(height - 5) + "\" font-size=\"10\">0</text>";
  svg += "<text x=\"" + std::to_string(width - right) + "\" y=\"" + std::to_string(height - 5) +
         "\" font-size=\"10\" text-anchor=\"end\">" + general(histogram.range) + "</text>";
  svg += "</svg>";
  return svg;
}

std::string td(const std::string& text, bool number = false) {
  return std::string(number ? "<td class=\"n\">" : "<td>") + text + "</td>";
}

std::string kv_table(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string html = "<table>";
  for (const auto& [key, value] : rows) html += "<tr><th>" + html_escape(key) + "</th>" + td(html_escape(value)) + "</tr>";
  return html + "</table>\n";
}

std::string card(const std::string& value, const std::string& label, const std::string& cls = "") {
  return "<div class=\"card\"><b" + (cls.empty() ? std::string() : " class=\"" + cls + "\"") + ">" + value + "</b><span>" +
         label + "</span></div>";
}

// "int8 -> int16 (activation, weight)" or "int8 -> CPU (float)".
std::string decision_change(const PrecisionDecision& d) {
  if (d.to == "cpu") return d.from + " \u2192 CPU (float)";
  std::string sides = d.activation ? "activation" : "";
  if (d.weight) sides += std::string(sides.empty() ? "" : ", ") + "weight";
  return d.from + " \u2192 " + d.to + (sides.empty() ? "" : " (" + sides + ")");
}

std::string precision_summary(const Precision& p) {
  std::string kind = p.target_kind;
  if (!p.classifier_outputs.empty()) {
    kind += " (classifier output";
    kind += p.classifier_outputs.size() == 1 ? " " : "s ";
    for (std::size_t i = 0; i < p.classifier_outputs.size(); ++i) kind += (i ? ", " : "") + p.classifier_outputs[i];
    kind += " compared through the logits)";
  }
  return kind + " " + fixed(p.before, 6) + " \u2192 " + fixed(p.after, 6) + " (target " + fixed(p.threshold, 6) +
         ", " + std::to_string(p.samples) + " samples): " + std::to_string(p.decisions.size()) + " node change" +
         (p.decisions.size() == 1 ? "" : "s") + ", " + std::to_string(p.raised_tensors) + " of " +
         std::to_string(p.quantized_tensors) + " quantized tensors raised";
}

// Nodes on the accelerated path, nodes off it.
std::pair<int64_t, int64_t> placement_counts(const Placement& placement) {
  int64_t accelerated = 0, others = 0;
  for (const PlacementNode& node : placement.nodes) (node.placement == placement.accelerator ? accelerated : others) += 1;
  return {accelerated, others};
}

std::string placement_label(const Placement& placement) {
  return "nodes on " + placement.accelerator + " / " + placement.fallback;
}

// "simulator, runtime": the roles in order.
std::string join_roles(const std::vector<std::string>& roles) {
  std::string out;
  for (const std::string& role : roles) out += (out.empty() ? "" : ", ") + role;
  return out;
}

// "runtime bit-identical to simulator": the files after the first against the first.
std::string files_agree_label(const Verify& v) {
  std::vector<std::string> rest(v.roles.begin() + (v.roles.empty() ? 0 : 1), v.roles.end());
  return join_roles(rest) + " bit-identical to " + (v.roles.empty() ? std::string() : v.roles[0]);
}

std::string perf_total(const Perf& perf) {
  for (const auto& [key, value] : perf.totals)
    if (key == perf.accelerator) {
      const std::size_t eq = value.rfind("= ");
      return eq == std::string::npos ? value : value.substr(eq + 2);
    }
  return "";
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_html(const ReportInput& input) {
  const std::string title = input.title.empty() ? "qflow report" : input.title;
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>" + html_escape(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  html += "<h1>" + html_escape(title) + "</h1>\n";
  html += "<nav><a href=\"#summary\">Summary</a><a href=\"#stages\">Stages</a><a href=\"#placement\">Placement</a>"
          "<a href=\"#layers\">Per-layer error</a><a href=\"#histograms\">Histograms</a>"
          "<a href=\"#sensitivity\">Sensitivity</a><a href=\"#precision\">Precision</a><a href=\"#verify\">Verify</a>"
          "<a href=\"#perf\">Performance</a></nav>\n";

  // Summary cards.
  html += "<section id=\"summary\"><h2>Summary</h2><div class=\"cards\">";
  html += card(std::to_string(input.stages.size()), "stages, " + seconds_text(total_seconds(input)));
  if (input.placement) {
    const auto [accelerated, others] = placement_counts(*input.placement);
    html += card(std::to_string(accelerated) + " / " + std::to_string(others), html_escape(placement_label(*input.placement)),
                 others == 0 ? "ok" : "");
  }
  if (input.comparison && !input.comparison->rows.empty()) {
    const LayerRow& worst = input.comparison->rows.front();
    html += card(fixed(worst.accumulated.cosine, 6), "worst layer cosine (" + std::to_string(input.comparison->samples) +
                                                         " samples)", worst.accumulated.cosine < 0.99 ? "bad" : "");
  }
  if (input.verify && !input.verify->roles.empty()) {
    const Verify& v = *input.verify;
    double cosine = 1.0;
    for (const VerifyOutput& out : v.outputs)
      if (!out.files.empty()) cosine = std::min(cosine, out.files[0].cosine_mean);
    if (v.roles.size() > 1)
      html += card(v.bit_identical ? "yes" : "no", html_escape(files_agree_label(v)), v.bit_identical ? "ok" : "bad");
    html += card(fixed(cosine, 6), "output cosine, " + html_escape(v.roles[0]) + " vs PTQ model (mean)");
  }
  if (input.perf) {
    const std::string total = perf_total(*input.perf);
    if (!total.empty()) html += card(html_escape(total), html_escape(input.perf->accelerator) + " estimate");
  }
  html += "</div></section>\n";

  // Stages.
  html += "<section id=\"stages\"><h2>Stages</h2>";
  if (input.stages.empty()) {
    html += "<p class=\"note\">No stage records.</p>";
  } else {
    double slowest = 0.0;
    for (const StageRow& s : input.stages) slowest = std::max(slowest, s.seconds);
    html += "<table><tr><th>#</th><th>stage</th><th>use</th><th>artifact</th><th>size</th><th>time</th><th></th></tr>";
    for (std::size_t i = 0; i < input.stages.size(); ++i) {
      const StageRow& s = input.stages[i];
      const double w = slowest > 0.0 ? s.seconds / slowest * 120.0 : 0.0;
      html += "<tr>" + td(std::to_string(i + 1), true) + td(html_escape(s.id)) + td("<code>" + html_escape(s.use) + "</code>") +
              td(s.artifact.empty() ? std::string("<i>in memory</i>") : "<code>" + html_escape(s.artifact) + "</code>") +
              td(bytes_text(s.bytes), true) +
              td(seconds_text(s.seconds), true) + td("<span class=\"bar\" style=\"width:" + fixed(w, 1) + "px\"></span>") +
              "</tr>";
    }
    html += "</table><p class=\"note\">Stage times are wall-clock times as the runner measured them (with --threads above 1, "
            "stages overlap); the report stage's own time is not included.</p>";
  }
  html += "</section>\n";

  // Placement.
  html += "<section id=\"placement\"><h2>Placement</h2>";
  if (!input.placement) {
    html += "<p class=\"note\">No check report (input 'check').</p>";
  } else {
    const Placement& p = *input.placement;
    html += kv_table(p.header);
    html += kv_table(p.summary);
    if (!p.subgraphs.empty()) {
      html += "<h3>Subgraphs</h3><pre><code>";
      for (const std::string& line : p.subgraphs) html += html_escape(line) + "\n";
      html += "</code></pre>";
    }
    std::vector<const PlacementNode*> others;
    for (const PlacementNode& node : p.nodes)
      if (node.placement != p.accelerator) others.push_back(&node);
    if (!others.empty()) {
      html += "<h3>Nodes off the " + html_escape(p.accelerator) +
              "</h3><table><tr><th>index</th><th>node</th><th>op type</th><th>placement</th><th>reason</th></tr>";
      for (const PlacementNode* node : others)
        html += "<tr>" + td(std::to_string(node->index), true) + td("<code>" + html_escape(node->node) + "</code>") +
                td(html_escape(node->op_type)) + td(html_escape(node->placement)) + td(html_escape(node->reason)) +
                "</tr>";
      html += "</table>";
    }
    html += "<details><summary>All " + std::to_string(p.nodes.size()) +
            " nodes</summary><table><tr><th>index</th><th>node</th><th>op type</th><th>placement</th><th>subgraph</th><th>reason</th></tr>";
    for (const PlacementNode& node : p.nodes)
      html += "<tr>" + td(std::to_string(node.index), true) + td("<code>" + html_escape(node.node) + "</code>") +
              td(html_escape(node.op_type)) + td(html_escape(node.placement)) + td(html_escape(node.subgraph), true) +
              td(html_escape(node.reason)) + "</tr>";
    html += "</table></details>";
  }
  html += "</section>\n";

  // Per-layer error.
  html += "<section id=\"layers\"><h2>Per-layer error</h2>";
  if (!input.comparison) {
    html += "<p class=\"note\">" + html_escape(input.comparison_note.empty() ? "No layer comparison." : input.comparison_note) +
            "</p>";
  } else {
    const LayerComparison& c = *input.comparison;
    html += "<p>Float model against the PTQ model on " + std::to_string(c.samples) +
            " samples, for every quantized activation, worst first. <i>Accumulated</i>: both models run from the "
            "sample; <i>isolated</i>: only the producing node quantized, fed float inputs.</p>";
    html += cosine_chart(c, 60);
    if (c.rows.size() > 60)
      html += "<p class=\"note\">The chart shows the 60 worst of " + std::to_string(c.rows.size()) + " tensors.</p>";
    html += "<details><summary>Table: all tensors with SQNR, max error and the isolated metrics</summary><table><tr><th>tensor</th><th>op</th><th>cosine</th><th>SQNR dB</th>"
            "<th>max |err|</th><th>isolated cosine</th><th>isolated SQNR dB</th></tr>";
    for (const LayerRow& row : c.rows)
      html += "<tr>" + td("<code>" + html_escape(row.tensor) + "</code>") + td(html_escape(row.op_type)) +
              td(fixed(row.accumulated.cosine, 6), true) + td(format_db(row.accumulated.sqnr_db), true) +
              td(general(row.accumulated.max_abs_error), true) +
              td(row.has_isolated ? fixed(row.isolated.cosine, 6) : "-", true) +
              td(row.has_isolated ? format_db(row.isolated.sqnr_db) : "-", true) + "</tr>";
    html += "</table></details>";
    if (!c.unmatched.empty()) {
      html += "<p class=\"note\">Quantized tensors the float model does not have: ";
      for (std::size_t i = 0; i < c.unmatched.size(); ++i) html += (i ? ", " : "") + ("<code>" + html_escape(c.unmatched[i]) + "</code>");
      html += "</p>";
    }
  }
  html += "</section>\n";

  // Histograms.
  html += "<section id=\"histograms\"><h2>Histograms</h2>";
  if (input.histograms.empty()) {
    html += "<p class=\"note\">No histograms (input 'statistics' from the histogram observer).</p>";
  } else {
    html += "<p>The observer's histogram of |x| per tensor (log counts), worst tensors by layer cosine first. "
            "<span style=\"color:#cf222e\">Red</span>: the calibration table's threshold; "
            "<span style=\"color:#0969da\">blue dashed</span>: other candidates for comparison.</p><div class=\"grid\">";
    for (const Histogram& h : input.histograms) {
      html += "<figure>" + histogram_chart(h) + "<figcaption><code>" + html_escape(h.tensor) + "</code><br>";
      if (h.cosine) html += "cosine " + fixed(*h.cosine, 6) + "; ";
      html += "range [" + general(h.min) + ", " + general(h.max) + "]";
      for (const Threshold& t : h.thresholds)
        html += "<br><span style=\"color:" + std::string(t.chosen ? "#cf222e" : "#0969da") + "\">" + html_escape(t.label) +
                "</span> " + general(t.value);
      html += "</figcaption></figure>";
    }
    html += "</div>";
    if (input.histograms_omitted > 0)
      html += "<p class=\"note\">" + std::to_string(input.histograms_omitted) +
              " more tensors have a histogram; the report draws the worst ones only.</p>";
  }
  html += "</section>\n";

  // Sensitivity.
  html += "<section id=\"sensitivity\"><h2>Sensitivity</h2>";
  if (!input.sensitivity) {
    html += "<p class=\"note\">No sensitivity ranking (input 'sensitivity').</p>";
  } else if (!input.sensitivity->measured) {
    html += "<p class=\"note\">" + html_escape(unranked_note(*input.sensitivity)) + "</p>";
  } else {
    const Sensitivity& sv = *input.sensitivity;
    html += "<p>Model-output cosine against the float model when only that node is quantized (its weights, or its "
            "output activation), mean over " + std::to_string(sv.samples) +
            " samples; the most sensitive nodes first (the " + std::to_string(std::min<std::size_t>(sv.ranking.size(), 20)) +
            " of " + std::to_string(sv.ranking.size()) + " shown).</p>";
    html += "<table><tr><th>#</th><th>node</th><th>op type</th><th>weights only</th><th>activation only</th></tr>";
    auto cell = [&](const std::optional<double>& c) { return td(c ? fixed(*c, 6) : std::string("-"), true); };
    for (std::size_t i = 0; i < std::min<std::size_t>(sv.ranking.size(), 20); ++i) {
      const SensitivityEntry& e = sv.ranking[i];
      html += "<tr>" + td(std::to_string(i + 1), true) + td("<code>" + html_escape(e.node) + "</code>") +
              td(html_escape(e.op_type)) + cell(e.weight_cosine) + cell(e.activation_cosine) + "</tr>";
    }
    html += "</table>";
  }
  html += "</section>\n";

  // Precision decisions.
  html += "<section id=\"precision\"><h2>Precision decisions</h2>";
  if (!input.precision) {
    html += "<p class=\"note\">No precision search (input 'precision').</p>";
  } else {
    const Precision& p = *input.precision;
    html += "<p>" + html_escape(precision_summary(p)) + ".</p>";
    if (p.decisions.empty()) {
      html += "<p class=\"ok\">No change needed: the PTQ model meets the target as it is.</p>";
    } else {
      html += "<table><tr><th>#</th><th>node</th><th>op type</th><th>change</th><th>tensors</th>"
              "<th>why: sensitivity</th><th>" + html_escape(p.target_kind) + " after</th></tr>";
      for (std::size_t i = 0; i < p.decisions.size(); ++i) {
        const PrecisionDecision& d = p.decisions[i];
        std::string tensors;
        for (const std::string& t : d.tensors) tensors += (tensors.empty() ? "" : ", ") + ("<code>" + html_escape(t) + "</code>");
        std::string change = html_escape(decision_change(d));
        if (!d.refusal.empty()) change += "<br><span class=\"note\">int16 refused: " + html_escape(d.refusal) + "</span>";
        html += "<tr>" + td(std::to_string(i + 1), true) + td("<code>" + html_escape(d.node) + "</code>") +
                td(html_escape(d.op_type)) + td(change) + td(tensors) + td(fixed(d.sensitivity, 6), true) +
                td(fixed(d.value_after, 6), true) + "</tr>";
      }
      html += "</table><h3>Replay</h3><p>Paste under the pipeline's <code>[quantization]</code> table "
              "(precision_overrides.toml):</p><pre><code>" + html_escape(p.overrides_toml) + "</code></pre>";
    }
  }
  html += "</section>\n";

  // Verify.
  html += "<section id=\"verify\"><h2>Verify</h2>";
  if (!input.verify) {
    html += "<p class=\"note\">No verify result (input 'verify').</p>";
  } else {
    const Verify& v = *input.verify;
    html += "<p>" + std::to_string(v.samples) + " samples through the PTQ model and the deployable files " +
            html_escape(join_roles(v.roles)) + "; ";
    if (v.roles.size() > 1)
      html += html_escape(files_agree_label(v)) + ": <b class=\"" + (v.bit_identical ? "ok\">yes" : "bad\">no") + "</b>.";
    html += "</p><table><tr><th>output</th><th>elements</th>";
    for (const std::string& role : v.roles) {
      const std::string r = html_escape(role);
      html += "<th>" + r + " cosine mean</th><th>" + r + " cosine min</th><th>" + r + " max |err|</th>";
    }
    if (v.roles.size() > 1) html += "<th>exact, as " + html_escape(v.roles[0]) + "</th>";
    html += "</tr>";
    for (const VerifyOutput& o : v.outputs) {
      html += "<tr>" + td("<code>" + html_escape(o.name) + "</code>") + td(std::to_string(o.elements), true);
      for (const VerifyFile& f : o.files)
        html += td(fixed(f.cosine_mean, 6), true) + td(fixed(f.cosine_min, 6), true) + td(general(f.max_abs_error), true);
      if (v.roles.size() > 1) html += td(std::to_string(o.exact_matches) + " / " + std::to_string(o.compared), true);
      html += "</tr>";
    }
    html += "</table>";
  }
  html += "</section>\n";

  // Performance.
  html += "<section id=\"perf\"><h2>Performance estimate</h2>";
  if (!input.perf) {
    html += "<p class=\"note\">No performance estimate (input 'perf').</p>";
  } else {
    const Perf& p = *input.perf;
    html += kv_table(p.header);
    if (!p.subgraphs.empty()) {
      html += "<h3>Subgraphs</h3><pre><code>";
      for (const std::string& line : p.subgraphs) html += html_escape(line) + "\n";
      html += "</code></pre>";
    }
    if (!p.totals.empty()) html += "<h3>Totals</h3>" + kv_table(p.totals);
    if (!p.slowest.empty()) {
      html += "<h3>Slowest " + html_escape(p.accelerator) + " nodes</h3><table><tr><th>node</th><th>op type</th><th>subgraph</th><th>cycles</th><th>bound</th></tr>";
      for (const PerfNode& n : p.slowest)
        html += "<tr>" + td("<code>" + html_escape(n.node) + "</code>") + td(html_escape(n.op_type)) +
                td(html_escape(n.subgraph), true) + td(fixed(n.cycles, 3), true) + td(html_escape(n.bound)) + "</tr>";
      html += "</table>";
    }
  }
  html += "</section>\n<p class=\"note\">Written by qflow. Self-contained: no scripts, fonts or network requests.</p>\n";
  html += "</body>\n</html>\n";
  return html;
}

std::string render_markdown(const ReportInput& input) {
  const std::string title = input.title.empty() ? "qflow report" : input.title;
  std::string md = "# " + md_escape(title) + "\n\n";

  md += "## Summary\n\n| | |\n|---|---|\n";
  md += "| stages | " + std::to_string(input.stages.size()) + " (" + seconds_text(total_seconds(input)) + ") |\n";
  if (input.placement) {
    const auto [accelerated, others] = placement_counts(*input.placement);
    md += "| " + md_escape(placement_label(*input.placement)) + " | " + std::to_string(accelerated) + " / " +
          std::to_string(others) + " |\n";
  }
  if (input.comparison && !input.comparison->rows.empty())
    md += "| worst layer cosine | " + fixed(input.comparison->rows.front().accumulated.cosine, 6) + " (" +
          md_escape(input.comparison->rows.front().tensor) + ", " + std::to_string(input.comparison->samples) + " samples) |\n";
  if (input.verify && input.verify->roles.size() > 1)
    md += "| " + md_escape(files_agree_label(*input.verify)) + " | " + (input.verify->bit_identical ? "yes" : "no") + " |\n";
  if (input.perf && !perf_total(*input.perf).empty())
    md += "| " + md_escape(input.perf->accelerator) + " estimate | " + md_escape(perf_total(*input.perf)) + " |\n";

  md += "\n## Stages\n\n";
  if (input.stages.empty()) {
    md += "No stage records.\n";
  } else {
    md += "| # | stage | use | artifact | size | time |\n|--:|---|---|---|--:|--:|\n";
    for (std::size_t i = 0; i < input.stages.size(); ++i) {
      const StageRow& s = input.stages[i];
      md += "| " + std::to_string(i + 1) + " | " + md_escape(s.id) + " | " + md_escape(s.use) + " | " + (s.artifact.empty() ? std::string("*in memory*") : md_escape(s.artifact)) +
            " | " + bytes_text(s.bytes) + " | " + seconds_text(s.seconds) + " |\n";
    }
  }

  md += "\n## Placement\n\n";
  if (!input.placement) {
    md += "No check report (input 'check').\n";
  } else {
    const Placement& p = *input.placement;
    md += "| | |\n|---|---|\n";
    for (const auto& [key, value] : p.header) md += "| " + md_escape(key) + " | " + md_escape(value) + " |\n";
    for (const auto& [key, value] : p.summary) md += "| " + md_escape(key) + " | " + md_escape(value) + " |\n";
    if (!p.subgraphs.empty()) {
      md += "\nSubgraphs:\n\n```\n";
      for (const std::string& line : p.subgraphs) md += line + "\n";
      md += "```\n";
    }
    md += "\n| index | node | op type | placement | subgraph | reason |\n|--:|---|---|---|--:|---|\n";
    for (const PlacementNode& n : p.nodes)
      md += "| " + std::to_string(n.index) + " | " + md_escape(n.node) + " | " + md_escape(n.op_type) + " | " +
            md_escape(n.placement) + " | " + md_escape(n.subgraph) + " | " + md_escape(n.reason) + " |\n";
  }

  md += "\n## Per-layer error\n\n";
  if (!input.comparison) {
    md += (input.comparison_note.empty() ? std::string("No layer comparison.") : md_escape(input.comparison_note)) + "\n";
  } else {
    const LayerComparison& c = *input.comparison;
    md += "Float model against the PTQ model on " + std::to_string(c.samples) + " samples, worst first.\n\n";
    md += "| tensor | op | cosine | SQNR dB | max abs err | isolated cosine | isolated SQNR dB |\n|---|---|--:|--:|--:|--:|--:|\n";
    for (const LayerRow& row : c.rows)
      md += "| " + md_escape(row.tensor) + " | " + md_escape(row.op_type) + " | " + fixed(row.accumulated.cosine, 6) + " | " +
            format_db(row.accumulated.sqnr_db) + " | " + general(row.accumulated.max_abs_error) + " | " +
            (row.has_isolated ? fixed(row.isolated.cosine, 6) : "-") + " | " +
            (row.has_isolated ? format_db(row.isolated.sqnr_db) : "-") + " |\n";
  }

  md += "\n## Histograms\n\n";
  if (input.histograms.empty()) {
    md += "No histograms (input 'statistics' from the histogram observer).\n";
  } else {
    md += "Thresholds per tensor (the HTML report draws the histograms); worst tensors by layer cosine first.\n\n";
    md += "| tensor | cosine | min | max | histogram range | thresholds |\n|---|--:|--:|--:|--:|---|\n";
    for (const Histogram& h : input.histograms) {
      std::string thresholds;
      for (const Threshold& t : h.thresholds)
        thresholds += (thresholds.empty() ? "" : ", ") + md_escape(t.label) + " " + general(t.value);
      md += "| " + md_escape(h.tensor) + " | " + (h.cosine ? fixed(*h.cosine, 6) : "-") + " | " + general(h.min) + " | " +
            general(h.max) + " | " + general(h.range) + " | " + thresholds + " |\n";
    }
    if (input.histograms_omitted > 0)
      md += "\n" + std::to_string(input.histograms_omitted) + " more tensors have a histogram.\n";
  }

  md += "\n## Sensitivity\n\n";
  if (!input.sensitivity) {
    md += "No sensitivity ranking (input 'sensitivity').\n";
  } else if (!input.sensitivity->measured) {
    md += unranked_note(*input.sensitivity) + "\n";
  } else {
    const Sensitivity& sv = *input.sensitivity;
    md += "Output cosine with only that node quantized, mean over " + std::to_string(sv.samples) +
          " samples, most sensitive first.\n\n| # | node | op type | weights only | activation only |\n|--:|---|---|--:|--:|\n";
    auto cell = [&](const std::optional<double>& c) { return c ? fixed(*c, 6) : std::string("-"); };
    for (std::size_t i = 0; i < std::min<std::size_t>(sv.ranking.size(), 20); ++i) {
      const SensitivityEntry& e = sv.ranking[i];
      md += "| " + std::to_string(i + 1) + " | " + md_escape(e.node) + " | " + md_escape(e.op_type) + " | " +
            cell(e.weight_cosine) + " | " + cell(e.activation_cosine) + " |\n";
    }
  }

  md += "\n## Precision decisions\n\n";
  if (!input.precision) {
    md += "No precision search (input 'precision').\n";
  } else {
    const Precision& p = *input.precision;
    md += precision_summary(p) + ".\n";
    if (p.decisions.empty()) {
      md += "\nNo change needed: the PTQ model meets the target as it is.\n";
    } else {
      md += "\n| # | node | op type | change | tensors | why: sensitivity | " + md_escape(p.target_kind) +
            " after |\n|--:|---|---|---|---|--:|--:|\n";
      for (std::size_t i = 0; i < p.decisions.size(); ++i) {
        const PrecisionDecision& d = p.decisions[i];
        std::string tensors;
        for (const std::string& t : d.tensors) tensors += (tensors.empty() ? "" : ", ") + md_escape(t);
        std::string change = decision_change(d);
        if (!d.refusal.empty()) change += "; int16 refused: " + d.refusal;
        md += "| " + std::to_string(i + 1) + " | " + md_escape(d.node) + " | " + md_escape(d.op_type) + " | " +
              md_escape(change) + " | " + tensors + " | " + fixed(d.sensitivity, 6) + " | " + fixed(d.value_after, 6) +
              " |\n";
      }
      md += "\nReplay: paste under the pipeline's `[quantization]` table (precision_overrides.toml):\n\n```toml\n" +
            p.overrides_toml + "```\n";
    }
  }

  md += "\n## Verify\n\n";
  if (!input.verify) {
    md += "No verify result (input 'verify').\n";
  } else {
    const Verify& v = *input.verify;
    md += std::to_string(v.samples) + " samples through the PTQ model and " + md_escape(join_roles(v.roles));
    if (v.roles.size() > 1) md += "; " + md_escape(files_agree_label(v)) + ": " + (v.bit_identical ? "yes" : "no");
    md += ".\n\n| output | elements |";
    std::string rule = "|---|--:|";
    for (const std::string& role : v.roles) {
      md += " " + md_escape(role) + " cosine mean | " + md_escape(role) + " cosine min | " + md_escape(role) +
            " max abs err |";
      rule += "--:|--:|--:|";
    }
    if (v.roles.size() > 1) {
      md += " exact, as " + md_escape(v.roles[0]) + " |";
      rule += "--:|";
    }
    md += "\n" + rule + "\n";
    for (const VerifyOutput& o : v.outputs) {
      md += "| " + md_escape(o.name) + " | " + std::to_string(o.elements) + " |";
      for (const VerifyFile& f : o.files)
        md += " " + fixed(f.cosine_mean, 6) + " | " + fixed(f.cosine_min, 6) + " | " + general(f.max_abs_error) + " |";
      if (v.roles.size() > 1) md += " " + std::to_string(o.exact_matches) + " / " + std::to_string(o.compared) + " |";
      md += "\n";
    }
  }

  md += "\n## Performance estimate\n\n";
  if (!input.perf) {
    md += "No performance estimate (input 'perf').\n";
  } else {
    const Perf& p = *input.perf;
    md += "| | |\n|---|---|\n";
    for (const auto& [key, value] : p.header) md += "| " + md_escape(key) + " | " + md_escape(value) + " |\n";
    for (const auto& [key, value] : p.totals) md += "| total " + md_escape(key) + " | " + md_escape(value) + " |\n";
    if (!p.subgraphs.empty()) {
      md += "\nSubgraphs:\n\n```\n";
      for (const std::string& line : p.subgraphs) md += line + "\n";
      md += "```\n";
    }
    if (!p.slowest.empty()) {
      md += "\n| slowest " + md_escape(p.accelerator) + " node | op type | subgraph | cycles | bound |\n|---|---|--:|--:|---|\n";
      for (const PerfNode& n : p.slowest)
        md += "| " + md_escape(n.node) + " | " + md_escape(n.op_type) + " | " + md_escape(n.subgraph) + " | " +
              fixed(n.cycles, 3) + " | " + md_escape(n.bound) + " |\n";
    }
  }
  return md;
}

}  // namespace qflow::report
