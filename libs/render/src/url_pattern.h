// GitRepo helmRepoURLRegex: which Helm repository URLs get the GitRepo's helmSecretName. Fleet evaluates it as a Go
// regexp (RE2 syntax, linear time). The pattern comes from the GitRepo, so it must not be able to hang or crash the
// bundler: std::regex backtracks recursively (a long input overflows the stack, `(a*)*b` takes exponential time).
//
// It is evaluated with PCRE2 (a dependency of libgit2, so always installed), which caps the work of one match
// (kMatchLimit backtracking steps, kDepthLimit nesting) and returns an error instead of running on; the pattern
// and the URL are bounded in length too. The syntax that URL patterns use is the same in RE2 and PCRE2: literals,
// `.`, classes `[a-z]` `[^/]`, `\d \w \s \.`, anchors `^ $`, groups `( )` `(?: )`, alternation `|`, repeats
// `* + ? {n,m}` (and lazy forms), flags `(?i)`. PCRE2 also accepts Perl extensions Go rejects (back-references,
// look-around); a GitRepo that uses them works here but not in Fleet. Private to libs/render.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flotilla/core/result.h"

namespace flotilla::render::detail {

inline constexpr size_t kMaxUrlPatternBytes = 1024;  //!< longer patterns are refused
inline constexpr size_t kMaxMatchedUrlBytes = 4096;  //!< longer URLs are refused (browsers stop near 2 kB)
inline constexpr uint32_t kMatchLimit = 100'000;     //!< PCRE2 match() calls for one URL
inline constexpr uint32_t kDepthLimit = 1'000;       //!< PCRE2 backtracking depth for one URL

//! True when `pattern` matches somewhere in `url` (Go's regexp.MatchString). kInvalid, naming the field and the
//! limit, when the pattern does not compile, either string is too long, or the match needs more than the limits.
Result<bool> urlPatternMatches(std::string_view pattern, std::string_view url);

}  // namespace flotilla::render::detail
