// Package kubetest runs a real Kubernetes control plane for tests: an etcd
// server, kube-apiserver and kube-controller-manager, built by
// tools/kube/build from the published Kubernetes and etcd modules and found
// on PATH or in $(go env GOPATH)/bin.
//
// One cluster serves one test package: TestMain calls Main, which starts
// it, runs the tests and stops it. Everything lives on loopback in a
// temporary folder: a CA, the API server's serving certificate and the
// service-account signing key are generated there, clients authenticate
// with a static token (the administrator) or with service-account tokens
// bound to a given RBAC Role (Cluster.Client), and authorization is RBAC.
// The custom resource definitions the backends use are installed at start:
// agent-sandbox's Sandbox (agents.x-k8s.io/v1beta1), VolumeSnapshot
// (snapshot.storage.k8s.io/v1) and Gateway API's HTTPRoute
// (gateway.networking.k8s.io/v1), written from their published schemas
// with the parts reclaimer reads spelled out and the embedded pod and claim
// specs left open.
//
// The controller manager runs the deployment, replica set, garbage
// collector (owner references) and PVC protection controllers, so a
// Deployment makes its pods and a claim in use is protected as in a real
// cluster. No kubelet or scheduler runs: pods stay Pending until a test
// marks one running by patching its status (MarkPodRunning), and no
// snapshot controller runs: a test plays it by setting
// status.readyToUse (MarkSnapshotReady).
//
// Without the programs the tests skip with a message; with
// RECLAIMER_REQUIRE_KUBERNETES=1 (as in CI) they fail instead. Every
// process is started with a parent-death signal, so a killed test binary
// leaves none behind.
package kubetest
