// Package fakes holds contract fakes of the remote providers for tests: an
// in-process HTTP server per provider (E2B, Daytona, OpenHands Cloud, an
// OpenHands agent-server, the Cloudflare Sandbox bridge and Containers API,
// and a server of reclaimer's own http backend protocol), and a gRPC server
// for Modal (which checks the token headers and every request's fields and
// fails the test on any RPC it was not told to allow), that
//
//   - validates every request and every response it sends against the
//     provider's published OpenAPI document with kin-openapi, and fails the
//     test on any mismatch or on any call outside the document;
//   - keeps sandbox state and timers as the provider documents them
//     (E2B: running/paused, timeout with pause or kill; Daytona: started,
//     stopped, archived, destroyed, with auto-stop, auto-archive and
//     auto-delete counted from last activity and from the stop);
//   - fails the test when a call that counts as activity or wakes a
//     sandbox is made (E2B connect and resume, Daytona start, OpenHands
//     resume and send-message, Cloudflare's /running and a persist of a
//     sleeping sandbox, an agent-server read of a runtime not running);
//   - injects bursts of 429 and 5xx answers on request.
//
// A fake is only as good as its strictness: nothing here accepts a request
// the provider would refuse. The documents are loaded and checked once per
// test binary. Concurrency: every fake is safe for concurrent use.
package fakes
