#!/usr/bin/env bash
# Regenerates the Go code in proto/bfspb from proto/*.proto.
# Needs protoc (Debian: protobuf-compiler libprotobuf-dev); the Go plugins
# come from the tool directives in go.mod, at the pinned versions.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
go build -o "$bin/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc
rm -f proto/bfspb/*.pb.go
PATH="$bin:$PATH" protoc -I proto \
  --go_out=. --go_opt=module=github.com/bfs-go/bfs \
  --go-grpc_out=. --go-grpc_opt=module=github.com/bfs-go/bfs \
  proto/*.proto
