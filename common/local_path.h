// Object store URLs (s3://, gs://, hdfs://, http(s)://, any scheme://) where
// Brook takes a local path or glob: it reads files through the filesystem
// only, and such a URL would otherwise fail later as "no file matches" (or
// become a relative path under the spec's directory). One check, called
// wherever a path or glob comes in: job spec fields, `brook trainer --data`,
// `brook data` inputs, `--model`, checkpoint and export dirs.
//
// Header-only, absl only.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace brook {

// The scheme ("s3", "gs", ...) when `value` starts with "scheme://", else "".
inline std::string UrlScheme(absl::string_view value) {
  const size_t sep = value.find("://");
  if (sep == absl::string_view::npos || sep == 0) return "";
  for (char c : value.substr(0, sep)) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') {
      return "";
    }
  }
  return absl::AsciiStrToLower(value.substr(0, sep));
}

// The reason `value` is not a local path ("" when it is one), without naming
// where it came from: for messages that name the field themselves.
inline std::string NotLocalPathReason(absl::string_view value) {
  const std::string scheme = UrlScheme(value);
  if (scheme.empty()) return "";
  return absl::StrCat("\"", value, "\": ", scheme,
                      ":// URLs are not supported yet: mount the data and give a path");
}

// OK for a local path; INVALID_ARGUMENT naming `what` (a flag or field,
// e.g. "--data") otherwise.
inline absl::Status CheckLocalPath(absl::string_view value, absl::string_view what) {
  const std::string reason = NotLocalPathReason(value);
  if (reason.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", reason));
}

}  // namespace brook
