package modalpb

// modal.pb.go and modal_grpc.pb.go come from modal.proto, made with protoc
// (Debian's protobuf-compiler), protoc-gen-go v1.36.12 and
// protoc-gen-go-grpc v1.6.2; a test regenerates and compares.
//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative modal.proto
