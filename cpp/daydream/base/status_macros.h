// Status propagation macros for absl::Status / absl::StatusOr.
//
// The system abseil (20220623) predates abseil's own status macros, so daydream
// carries these two. They are the only control-flow macros in the code base.
#ifndef DAYDREAM_BASE_STATUS_MACROS_H_
#define DAYDREAM_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DD_STATUS_CONCAT_INNER_(a, b) a##b
#define DD_STATUS_CONCAT_(a, b) DD_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if
// it is not OK.
#define DD_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::absl::Status dd_status_ = (expr);           \
    if (!dd_status_.ok()) return dd_status_;      \
  } while (false)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns the status from
// the enclosing function, otherwise moves the value into `lhs` (which may be a
// declaration such as `auto x`).
#define DD_ASSIGN_OR_RETURN(lhs, rexpr) \
  DD_ASSIGN_OR_RETURN_IMPL_(DD_STATUS_CONCAT_(dd_statusor_, __LINE__), lhs, rexpr)

#define DD_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                              \
  if (!statusor.ok()) return statusor.status();         \
  lhs = std::move(statusor).value()

#endif  // DAYDREAM_BASE_STATUS_MACROS_H_
