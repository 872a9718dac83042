#include "common/yaml_fields.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/absl_compat.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/parser.h"

namespace brook::yaml {

int LineOf(const YAML::Node& n) { return n.Mark().is_null() ? 0 : n.Mark().line + 1; }

std::string Describe(const YAML::Node& n) {
  if (n.IsScalar()) return absl::StrCat("\"", n.Scalar(), "\"");
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "nothing";
}

std::string LineSuffix(int line) { return line > 0 ? absl::StrCat(" (line ", line, ")") : ""; }

absl::Status FieldError(std::string_view where, int line, std::string_view msg) {
  return absl::InvalidArgumentError(
      absl::StrCat(AbslView(where), LineSuffix(line), ": ", AbslView(msg)));
}

namespace {

// Reads events without building nodes and throws at the start of a second
// document. YAML::LoadAll is not used: yaml-cpp 0.7's loops forever on some
// malformed input (found by the job_spec fuzzer), and it builds every node.
class SecondDocumentFinder : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1) {
      throw YAML::Exception(mark, "a second document (after ---); a spec is one YAML document");
    }
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  int documents_ = 0;
};

}  // namespace

YAML::Node LoadDocument(const std::string& text) {
  YAML::Node doc = YAML::Load(text);  // the first document, as every spec reads it
  std::istringstream in(text);
  YAML::Parser parser(in);
  SecondDocumentFinder finder;
  // At most two documents are looked at: the second throws at its start.
  if (parser.HandleNextDocument(finder)) parser.HandleNextDocument(finder);
  return doc;
}

absl::Status InvalidYaml(std::string_view where, const std::exception& e) {
  if (const auto* y = dynamic_cast<const YAML::Exception*>(&e)) {
    return FieldError(where, y->mark.is_null() ? 0 : y->mark.line + 1,
                      absl::StrCat("invalid YAML: ", y->msg));
  }
  return FieldError(where, 0, absl::StrCat("invalid YAML: ", e.what()));
}

MapReader::MapReader(YAML::Node node, std::string path, std::string root_name)
    : MapReader(std::move(node), path, path.empty() ? std::move(root_name) : path, false) {}

MapReader::MapReader(YAML::Node node, std::string path, std::string name, bool named)
    : node_(std::move(node)), path_(std::move(path)), name_(std::move(name)), named_(named) {}

MapReader MapReader::Named(YAML::Node node, std::string name) {
  return MapReader(std::move(node), "", std::move(name), true);
}

absl::Status MapReader::Check(absl::Span<const std::string_view> allowed,
                              std::string_view example) {
  if (!node_.IsMap()) {
    return MapError(
        absl::StrCat("must be a map such as ", AbslView(example), ", got ", Describe(node_)));
  }
  const std::string names = absl::StrJoin(
      allowed, ", ", [](std::string* out, std::string_view a) { out->append(a.data(), a.size()); });
  for (const auto& pair : node_) {
    // By value: yaml-cpp's iterator returns a proxy, so a reference to
    // pair.first would dangle.
    const YAML::Node key = pair.first;
    const int l = LineOf(key);
    if (!key.IsScalar()) return FieldError(name_, l, "keys must be plain names");
    const std::string& k = key.Scalar();
    bool known = false;
    for (std::string_view a : allowed) known |= (a == k);
    // A dotted path names the key; a named map's message has to.
    if (!known) {
      return FieldError(Path(k), l,
                        named_ ? absl::StrCat("unknown key \"", k, "\"; allowed here: ", names)
                               : absl::StrCat("unknown key; allowed here: ", names));
    }
    auto [pos, inserted] = lines_.emplace(k, l);
    if (!inserted) {
      const std::string twice = absl::StrCat("given twice (first on line ", pos->second, ")");
      return FieldError(Path(k), l, named_ ? absl::StrCat("key \"", k, "\" ", twice) : twice);
    }
  }
  return absl::OkStatus();
}

int MapReader::KeyLine(const std::string& key) const {
  auto it = lines_.find(key);
  return it == lines_.end() ? line() : it->second;
}

std::string MapReader::Path(const std::string& key) const {
  if (named_) return name_;
  return path_.empty() ? key : absl::StrCat(path_, ".", key);
}

absl::Status MapReader::Error(const std::string& key, std::string_view msg) const {
  return FieldError(Path(key), KeyLine(key), msg);
}

absl::Status MapReader::MapError(std::string_view msg) const {
  return FieldError(name_, line(), msg);
}

absl::Status MapReader::Missing(const std::string& key, std::string_view what) const {
  const std::string missing = named_ ? absl::StrCat("missing \"", key, "\"") : "missing";
  return FieldError(Path(key), line(),
                    what.empty() ? missing : absl::StrCat(missing, "; ", AbslView(what)));
}

absl::Status MapReader::ValueError(const std::string& key, std::string_view must) const {
  return Error(key, named_ ? absl::StrCat(key, " ", AbslView(must)) : std::string(must));
}

absl::Status MapReader::Int(const std::string& key, int64_t min, int64_t max, int64_t* out) const {
  if (!Has(key)) return absl::OkStatus();
  const YAML::Node v = Get(key);
  int64_t x = 0;
  if (!v.IsScalar() || !YAML::convert<int64_t>::decode(v, x) || x < min || x > max) {
    return ValueError(
        key, absl::StrCat("must be an integer in [", min, ", ", max, "], got ", Describe(v)));
  }
  *out = x;
  return absl::OkStatus();
}

absl::Status MapReader::Int(const std::string& key, int min, int max, int* out) const {
  int64_t x = *out;
  absl::Status s = Int(key, int64_t{min}, int64_t{max}, &x);
  if (s.ok()) *out = static_cast<int>(x);
  return s;
}

absl::Status MapReader::Uint(const std::string& key, uint64_t* out) const {
  if (!Has(key)) return absl::OkStatus();
  const YAML::Node v = Get(key);
  uint64_t x = 0;
  // yaml-cpp's unsigned conversion accepts "-1" (stream extraction wraps it).
  if (!v.IsScalar() || v.Scalar().empty() || v.Scalar()[0] == '-' ||
      !YAML::convert<uint64_t>::decode(v, x)) {
    return ValueError(key, absl::StrCat("must be an integer in [0, 2^64), got ", Describe(v)));
  }
  *out = x;
  return absl::OkStatus();
}

absl::Status MapReader::Double(const std::string& key, double min, double max, bool min_exclusive,
                               double* out) const {
  if (!Has(key)) return absl::OkStatus();
  const YAML::Node v = Get(key);
  double x = 0;
  const bool ok = v.IsScalar() && YAML::convert<double>::decode(v, x) && std::isfinite(x) &&
                  (min_exclusive ? x > min : x >= min) && x <= max;
  if (!ok) {
    std::string range;
    if (max >= std::numeric_limits<float>::max()) {  // no upper bound
      range = absl::StrCat(min_exclusive ? "> " : ">= ", min);
    } else {
      range = absl::StrCat("in ", min_exclusive ? "(" : "[", min, ", ", max, "]");
    }
    return ValueError(key, absl::StrCat("must be a finite number ", range, ", got ", Describe(v)));
  }
  *out = x;
  return absl::OkStatus();
}

absl::Status MapReader::Float(const std::string& key, double min, double max, bool min_exclusive,
                              float* out) const {
  double x = *out;
  absl::Status s = Double(key, min, max, min_exclusive, &x);
  if (s.ok()) *out = static_cast<float>(x);
  return s;
}

absl::Status MapReader::String(const std::string& key, std::string* out) const {
  if (!Has(key)) return absl::OkStatus();
  const YAML::Node v = Get(key);
  if (!v.IsScalar() || v.Scalar().empty()) {
    return ValueError(key, absl::StrCat("must be a non-empty string, got ", Describe(v)));
  }
  *out = v.Scalar();
  return absl::OkStatus();
}

}  // namespace brook::yaml
