// Graph-transformation passes: the interface every optimization model
// implements, their typed options, and the registry that maps names
// ("amp", "tensor_fusion", ...) to passes for Python, the CLI and search.
//
// As XLA's HloPassInterface: a pass is one class with name() and a
// non-virtual Run() that calls the protected RunImpl() and returns whether
// the graph changed. Configuration comes through the constructor (typed
// options, parsed and checked by the registry). A pass never guesses: where it
// cannot apply it returns an error that says why.
#ifndef DAYDREAM_PASSES_PASS_H_
#define DAYDREAM_PASSES_PASS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daydream/graph/graph.h"

namespace daydream {

// What passes share during one pipeline run: notes for the user ("inserted
// 12 all-reduces of 97.5 MB in 5 buckets").
struct PassContext {
  std::vector<std::string> notes;
  void Note(std::string note) { notes.push_back(std::move(note)); }
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;

  // Applies the pass. Returns true when the graph changed; the graph's
  // adjacency is current afterwards.
  absl::StatusOr<bool> Run(Graph& graph, PassContext& context) { return RunImpl(graph, context); }

 protected:
  virtual absl::StatusOr<bool> RunImpl(Graph& graph, PassContext& context) = 0;
};

// --- options -----------------------------------------------------------------

enum class OptionType { kDouble, kInt, kBool, kString };

struct OptionSpec {
  std::string name;
  OptionType type = OptionType::kDouble;
  std::string default_value;  // as text; "" for "unset" on kString options
  std::string help;
};

// Option values given by a caller, as text ("25", "ring", "true").
using OptionMap = std::map<std::string, std::string>;

// Parsed, checked option values of one pass.
class PassOptions {
 public:
  // Checks `given` against `specs`: unknown names and unparsable values are
  // errors naming the pass, the option and the accepted form.
  static absl::StatusOr<PassOptions> Parse(std::string_view pass, const std::vector<OptionSpec>& specs,
                                           const OptionMap& given);

  double Double(const std::string& name) const;
  int64_t Int(const std::string& name) const;
  bool Bool(const std::string& name) const;
  const std::string& String(const std::string& name) const;
  // True when the caller set the option (not its default).
  bool IsSet(const std::string& name) const { return set_.count(name) > 0; }

 private:
  std::map<std::string, double> numbers_;
  std::map<std::string, std::string> strings_;
  std::map<std::string, int> set_;
};

// trace event -> time factor of the CPU op recorded by that event.
using EventFactors = std::map<int64_t, double>;

// Parses an "EVENT=FACTOR;EVENT=FACTOR;..." option ("" is empty): event
// indexes >= 0, finite factors > 0. Errors name `pass` and `option`.
absl::StatusOr<EventFactors> ParseEventFactors(std::string_view pass, std::string_view option,
                                               const std::string& text);

// The factor `factors` holds for the trace event task `t` was built from;
// nullptr when it has none (or `t` has no trace event).
const double* EventFactorOf(const EventFactors& factors, const Task& t);

// --- registry ----------------------------------------------------------------

struct PassInfo {
  std::string name;
  std::string summary;  // one line
  std::string model;    // what the pass models and its source (docstring)
  std::vector<OptionSpec> options;
  std::function<absl::StatusOr<std::unique_ptr<Pass>>(const PassOptions&)> create;
};

// Every registered pass, in a stable order.
const std::vector<PassInfo>& RegisteredPasses();

// The pass `name` configured with `options`; errors name unknown passes (with
// the list of known ones) and bad options.
absl::StatusOr<std::unique_ptr<Pass>> CreatePass(std::string_view name, const OptionMap& options = {});

}  // namespace daydream

#endif  // DAYDREAM_PASSES_PASS_H_
