// Package agentsandbox is the "agent-sandbox" backend: the Sandbox custom
// resources (agents.x-k8s.io/v1beta1, the Kubernetes SIG project
// agent-sandbox) of a namespace that match a label selector. A runtime is
// one Sandbox; its ID is the Sandbox's name.
//
// Roles: Lister, Suspender (spec.operatingMode: Suspended: the controller
// deletes the pod and keeps the volumes), Deleter (the Sandbox; the claims
// made from its volumeClaimTemplates are owned by it and go with it),
// NativeLifecycle (spec.shutdownTime, a Deadline whose step is suspend for
// shutdownPolicy Retain, where expiry deletes the pod and keeps the
// Sandbox and its volumes, and delete for Delete), Exporter and Restorer
// (a VolumeSnapshot of each claim, as the kubernetes backend takes them;
// restore makes the claims again under their names, which a Sandbox of the
// same name adopts). With archive = "none" there is no Exporter or
// Restorer and volumes are not counted as unsaved work.
//
// Native first: idle_suspend (from the last activity, later while a lease
// or hold lasts, capped by max_lifetime) is written into spec.shutdownTime
// and read back for drift (native plan, native sync); a shutdownTime that
// deletes (shutdownPolicy Delete) is only ever moved later, never earlier
// and never set where there is none. Retention stays with the loop: it
// announces, archives, then deletes.
//
// State: suspended (operatingMode Suspended, or expired: Ready false with
// reason SandboxExpired), running (Ready true), stopped (Finished true: its
// pod ended), starting otherwise. Activity: the Sandbox's own times (its
// creation and its conditions' transitions: the pod becoming ready or
// going), and the ledger's; never an exec or port-forward. Disk: the
// storage its claim templates request.
//
// Reading: one informer over the namespace's Sandboxes matching the
// selector, so an unchanged pass sends no request; listing named sandboxes
// (apply's re-observation) reads the API server afresh.
package agentsandbox
