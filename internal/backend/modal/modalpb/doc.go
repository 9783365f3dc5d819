// Package modalpb is the generated client and server code of the few RPCs
// of Modal's gRPC API that reclaimer calls (service
// modal.client.ModalClient), from modal.proto: messages named and numbered
// as Modal publishes them, no more. Do not edit the .pb.go files; change
// modal.proto and run go generate.
package modalpb
