// RETURN_IF_ERROR / ASSIGN_OR_RETURN: our abseil (20220623) predates
// absl/status/status_macros.h, so we keep these small versions.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define BROOK_STATUS_CONCAT_INNER(a, b) a##b
#define BROOK_STATUS_CONCAT(a, b) BROOK_STATUS_CONCAT_INNER(a, b)

// Evaluates `expr` (an absl::Status); returns it from the caller if not OK.
#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    ::absl::Status brook_status_tmp_ = (expr);             \
    if (!brook_status_tmp_.ok()) return brook_status_tmp_; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, FunctionReturningStatusOr());
#define ASSIGN_OR_RETURN(lhs, expr) \
  BROOK_ASSIGN_OR_RETURN_IMPL(BROOK_STATUS_CONCAT(brook_statusor_, __LINE__), lhs, expr)

#define BROOK_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()
