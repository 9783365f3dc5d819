// Package kubeclient is the one wrapper of the Kubernetes API the
// Kubernetes backends share: how a client is configured (in-cluster, then
// $KUBECONFIG, then ~/.kube/config, or a named file and context), how its
// requests are bounded (a token-bucket rate and a cap on requests in
// flight, like package remote, counted for benchmarks), and Watched, a
// cache of one kind of object kept by an informer (list once, then watch
// from that resource version), so that a pass over an unchanged cluster
// makes no request at all.
//
// Archives: ExportSnapshots takes a VolumeSnapshot of each claim of a
// runtime, waits (watching) until each is ready to use, and stores a
// manifest naming them through package archive; a failure deletes what it
// took. RestoreClaims makes new claims from them. Both Kubernetes backends
// archive this way.
//
// Reading never changes an object: nothing here execs into a pod, opens a
// port-forward or proxies to a kubelet (those are use, and may wake a
// runtime).
//
// Health: a Watched whose list or watch fails is marked broken with the
// error until a list or watch succeeds again (the informer retries with
// backoff by itself); Ready waits a bounded time for it to be healthy and
// synced, and otherwise returns that error, so a pass over a cluster it
// cannot read fails loudly instead of acting on what it saw before.
//
// Errors: API errors keep client-go's types (apierrors.IsForbidden and the
// like work on them); Classify wraps them into backend's categories with a
// message that names the verb and resource refused.
package kubeclient
