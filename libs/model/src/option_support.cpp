// Which option fields Flotilla implements (option_support.h), and the decoder's field paths, collected by walking
// the same field lists the decoder uses (option_fields.h).
#include "flotilla/model/option_support.h"

#include "option_fields.h"

namespace flotilla::model {
namespace {

//! A field-list visitor that records field paths instead of reading values: a nested object contributes its own
//! fields ("helm.chart"), every other accessor one leaf.
class FieldPaths {
 public:
  FieldPaths(std::string prefix, std::vector<std::string>& out) : prefix_(std::move(prefix)), out_(out) {}

  template <typename... Ignored>
  void str(std::string_view key, Ignored&&... /*unused*/) {
    leaf(key);
  }
  template <typename... Ignored>
  void boolean(std::string_view key, Ignored&&... /*unused*/) {
    leaf(key);
  }
  template <typename T>
  void count(std::string_view key, T& /*unused*/) {
    leaf(key);
  }
  template <typename T>
  void optCount(std::string_view key, T& /*unused*/) {
    leaf(key);
  }
  template <typename T>
  void map(std::string_view key, T& /*unused*/) {
    leaf(key);
  }
  template <typename T>
  void strings(std::string_view key, T& /*unused*/) {
    leaf(key);
  }
  template <typename T>
  void stringMap(std::string_view key, T& /*unused*/) {
    leaf(key);
  }
  template <typename T>
  void optStringMap(std::string_view key, T& /*unused*/) {
    leaf(key);
  }
  template <typename... Ignored>
  void value(std::string_view key, Ignored&&... /*unused*/) {
    leaf(key);
  }
  template <typename T, typename Fn>
  void objects(std::string_view key, std::vector<T>& /*unused*/, Fn&& /*fields*/) {
    leaf(key);  // a list is one field: its entries are decided as a whole
  }
  template <typename T, typename Fn>
  void object(std::string_view key, std::optional<T>& /*unused*/, Fn&& fields) {
    FieldPaths nested(prefix_ + std::string(key) + ".", out_);
    T blank{};
    fields(nested, blank);
  }
  void require(std::string_view /*key*/) {}
  template <typename Fn>
  void validate(Fn&& /*check*/) {}

 private:
  void leaf(std::string_view key) { out_.push_back(prefix_ + std::string(key)); }

  std::string prefix_;
  std::vector<std::string>& out_;
};

}  // namespace

std::vector<UnsupportedOption> unsupportedOptionFields(const BundleDeploymentOptions& options) {
  std::vector<UnsupportedOption> out;
  if (!options.downstream_resources.empty()) {
    out.push_back(
        {"downstreamResources", "copying Secrets and ConfigMaps to the downstream cluster is not implemented"});
  }
  if (!options.helm) {
    return out;
  }
  const HelmOptions& helm = *options.helm;
  if (!helm.values_from.empty()) {
    out.push_back({"helm.valuesFrom",
                   "values are rendered on the hub, which cannot read the downstream cluster's ConfigMaps and Secrets; "
                   "use values or valuesFiles"});
  }
  if (helm.max_history > 0) {
    out.push_back({"helm.maxHistory", "the agent keeps exactly one previous manifest (the one atomic reverts to)"});
  }
  if (helm.wait_for_jobs && helm.timeout_seconds == 0) {
    out.push_back({"helm.waitForJobs", "it only applies while the agent waits for health: set helm.timeoutSeconds"});
  }
  if (helm.skip_schema_validation) {
    out.push_back({"helm.skipSchemaValidation", "the bundler always validates charts against values.schema.json"});
  }
  return out;
}

Status checkSupportedOptions(const BundleDeploymentOptions& options, std::string_view path) {
  auto unsupported = unsupportedOptionFields(options);
  if (unsupported.empty()) {
    return {};
  }
  std::string message;
  for (const auto& field : unsupported) {
    message += (message.empty() ? "" : "; ") + (path.empty() ? std::string() : std::string(path) + ".") + field.field +
               ": not supported by Flotilla (" + field.why + ")";
  }
  return fail(ErrorKind::kInvalid, message);
}

std::vector<std::string> optionFieldPaths() {
  std::vector<std::string> out;
  FieldPaths visitor("", out);
  BundleDeploymentOptions blank;
  fields(visitor, blank);
  return out;
}

}  // namespace flotilla::model
