// Package kubernetes is the "kubernetes" backend: runtimes laid out as
// OpenHands' runtime-api lays them out in a namespace (a Deployment scaled
// to 0 when paused, a PersistentVolumeClaim holding the workspace, a
// Service, an Ingress or HTTPRoute, a PodDisruptionBudget, a
// ServiceAccount), every object labelled with the runtime's id. A runtime
// is the set of objects of the namespace that match the selector and share
// one value of the id label (runtime_id by default); the value is its ID.
//
// Roles: Lister, Suspender (scale every Deployment of the runtime to 0
// through the /scale subresource: the volume is kept), Deleter (every object
// of the runtime, in the runtime-api's order, the volume last), Exporter
// (a VolumeSnapshot of each volume, waited for until status.readyToUse, and
// a manifest naming them in the archive storage) and Restorer (a new claim
// from each snapshot, named in the output). With archive = "none" the
// backend is built without Exporter and Restorer: volumes are then not
// counted as unsaved work and retention deletes without a snapshot.
//
// State: running (a Deployment wants replicas and one is ready), starting
// (wanted, none ready yet), suspended (every Deployment at 0 replicas, the
// volume kept), stopped (no Deployment left: a volume or other objects
// only). Disk: each volume's capacity (its requested size until bound).
// The cluster reports a volume's usage only through the kubelet's stats
// (nodes/proxy, a node-wide right): it is not read.
//
// Activity: never an exec into a pod, never a port-forward (that is use, and
// may wake things): the objects' own times (creation, each pod's start and
// its containers' starts, the Deployment's condition transitions, which
// move when its replicas change) and what the ledger recorded. A running
// runtime's CreatedAt is the start of its oldest running pod, so
// max_lifetime caps the current run.
//
// Reading: every kind is watched by an informer narrowed to the namespace
// and selector (list once, then watch from that resource version), so a
// pass over an unchanged cluster sends no request. Listing named runtimes
// (apply's re-observation under the lock) reads afresh from the API server
// what decides what may be done (Deployments, pods, claims: 3 requests)
// and the rest from the caches while they are healthy; a deletion reads
// every kind afresh.
// Kinds whose API the cluster does not serve (HTTPRoute, VolumeSnapshot)
// are looked up again at each full listing. A cache whose watch is broken
// makes the listing fail with the reason once a bounded wait has not healed
// it: the pass reports the source instead of acting on old news.
//
// Deleting: objects are deleted with their UID as precondition (a
// same-named newcomer is never deleted) and the Deployment in the
// foreground, its pods waited for (bounded); a volume still used by a pod
// (of another runtime, a debugging pod, or its own that has not ended) is
// reported with ErrBusy and kept: nothing is forced, no finalizer is
// removed. A later pass finishes.
//
// Errors: API errors are wrapped by kubeclient.Classify (a refused verb is
// backend.ErrProtected naming the verb and resource the Role lacks).
package kubernetes
