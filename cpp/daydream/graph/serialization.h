// Graph <-> protobuf (proto/daydream/graph.proto). The only file that
// includes the generated *.pb.h.
#ifndef DAYDREAM_GRAPH_SERIALIZATION_H_
#define DAYDREAM_GRAPH_SERIALIZATION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daydream/graph/graph.h"

namespace daydream {

// Schema version written into every graph file; files from a newer version
// are refused with a message saying so.
inline constexpr uint32_t kGraphSchemaVersion = 1;

// Encodes `graph` as a binary daydream.proto.Graph message.
absl::StatusOr<std::string> SerializeGraph(const Graph& graph);

// Decodes bytes written by SerializeGraph. The result has its adjacency built
// and passes Validate(); `source` names the input in errors.
absl::StatusOr<Graph> DeserializeGraph(const std::string& bytes, const std::string& source = "<memory>");

// Writes `graph` to `path` atomically (temporary file + rename).
absl::Status SaveGraph(const Graph& graph, const std::string& path);

// Reads a graph written by SaveGraph.
absl::StatusOr<Graph> LoadGraph(const std::string& path);

}  // namespace daydream

#endif  // DAYDREAM_GRAPH_SERIALIZATION_H_
