#include "daydream/trace/job.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "daydream/base/strings.h"
#include "daydream/base/status_macros.h"

namespace daydream {

bool IsTraceFileName(const std::string& name) {
  return EndsWith(name, ".json") || EndsWith(name, ".json.gz");
}

absl::StatusOr<Job> LoadJob(const std::string& path, const ReadOptions& options) {
  namespace fs = std::filesystem;
  Job job;
  job.path = path;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return absl::NotFoundError(StrCat(path, ": no such file or directory"));
  }
  if (!fs::is_directory(status)) {
    DD_ASSIGN_OR_RETURN(Trace trace, ReadTraceFile(path, options));
    if (trace.rank < 0) trace.rank = 0;
    job.ranks.push_back(std::move(trace));
    return job;
  }
  std::vector<std::string> files;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && IsTraceFileName(it->path().filename().string())) {
      files.push_back(it->path().string());
    }
  }
  if (ec) return absl::InvalidArgumentError(StrCat(path, ": cannot list directory: ", ec.message()));
  if (files.empty()) {
    return absl::InvalidArgumentError(
        StrCat(path, ": no trace files (*.json, *.json.gz) in this directory"));
  }
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) {
    DD_ASSIGN_OR_RETURN(Trace trace, ReadTraceFile(file, options));
    job.ranks.push_back(std::move(trace));
  }
  // Ranks must be distinct; when they are not (or unknown), fall back to name order.
  std::set<int32_t> seen;
  bool usable = true;
  for (const Trace& t : job.ranks) usable = usable && t.rank >= 0 && seen.insert(t.rank).second;
  if (!usable) {
    job.warnings.Add("ranks_from_order",
                     StrCat(path, ": rank missing or repeated in some files; ranks assigned "
                                        "in file-name order"));
    for (size_t i = 0; i < job.ranks.size(); ++i) job.ranks[i].rank = static_cast<int32_t>(i);
  }
  std::sort(job.ranks.begin(), job.ranks.end(),
            [](const Trace& a, const Trace& b) { return a.rank < b.rank; });
  return job;
}

}  // namespace daydream
