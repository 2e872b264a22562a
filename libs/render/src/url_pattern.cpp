#include "url_pattern.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "flotilla/core/c_handle.h"

namespace flotilla::render::detail {
namespace {

constexpr const char* kField = "helmRepoURLRegex";

std::string pcreMessage(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  if (pcre2_get_error_message(code, buffer.data(), buffer.size()) < 0) {
    return "PCRE2 error " + std::to_string(code);
  }
  return reinterpret_cast<const char*>(buffer.data());
}

Error invalid(const std::string& message) {
  return makeError(ErrorKind::kInvalid, std::string("the GitRepo's ") + kField + " " + message, kField);
}

}  // namespace

Result<bool> urlPatternMatches(std::string_view pattern, std::string_view url) {
  if (pattern.size() > kMaxUrlPatternBytes) {
    return fail(invalid("is " + std::to_string(pattern.size()) + " bytes, over the limit of " +
                        std::to_string(kMaxUrlPatternBytes)));
  }
  if (url.size() > kMaxMatchedUrlBytes) {
    return fail(invalid("cannot be matched against a URL of " + std::to_string(url.size()) + " bytes (the limit is " +
                        std::to_string(kMaxMatchedUrlBytes) + ")"));
  }
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  CHandle<pcre2_code, pcre2_code_free> code(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                                          PCRE2_NEVER_BACKSLASH_C, &error_code, &error_offset,
                                                          nullptr));
  if (!code) {
    return fail(invalid("is not a valid regular expression: " + pcreMessage(error_code) + " at offset " +
                        std::to_string(error_offset)));
  }
  CHandle<pcre2_match_context, pcre2_match_context_free> context(pcre2_match_context_create(nullptr));
  CHandle<pcre2_match_data, pcre2_match_data_free> data(pcre2_match_data_create_from_pattern(code.get(), nullptr));
  if (!context || !data) {
    return fail(makeError(ErrorKind::kInternal, "out of memory matching the helmRepoURLRegex", kField));
  }
  pcre2_set_match_limit(context.get(), kMatchLimit);
  pcre2_set_depth_limit(context.get(), kDepthLimit);
  const int rc =
      pcre2_match(code.get(), reinterpret_cast<PCRE2_SPTR>(url.data()), url.size(), 0, 0, data.get(), context.get());
  if (rc >= 0) {
    return true;
  }
  if (rc == PCRE2_ERROR_NOMATCH) {
    return false;
  }
  return fail(invalid("needs more work than allowed to match a URL (" + pcreMessage(rc) +
                      "): simplify nested repeats such as (a*)*"));
}

}  // namespace flotilla::render::detail
